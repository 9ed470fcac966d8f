// How the egress proxy's refusals reach the server's log: the proxy runs in the sandbox's keeper,
// which outlives servers and has no log of its own, so it appends one JSON line per refusal —
// the time and the host name, nothing else — to the sandbox's state directory, and the provider
// reads the lines it has not seen yet whenever it works on that sandbox (see DenialReporter in
// denial-reporter.ts). Bounded: a host is recorded at most once a minute, and the file stops
// growing at 256 KiB.
import { appendFileSync, closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DENIALS_FILE } from '../sandbox/state-dir.js';

/** One refusal as recorded: epoch milliseconds and the host name the sandbox asked for. */
export interface DenialRecord {
  at: number;
  host: string;
}

const MAX_FILE_BYTES = 256 * 1024;
const REPEAT_AFTER_MS = 60_000;
const MAX_READ_BYTES = 64 * 1024;

/** The keeper's side: records refusals in the sandbox's state directory. */
export class DenialLog {
  private readonly lastRecorded = new Map<string, number>();
  private isFull = false;

  constructor(private readonly dir: string) {}

  /** Appends `host` unless it was recorded in the last minute or the file is full; never throws. */
  record(host: string, nowMs = Date.now()): void {
    if (this.isFull) return;
    const last = this.lastRecorded.get(host);
    if (last !== undefined && nowMs - last < REPEAT_AFTER_MS) return;
    if (this.lastRecorded.size >= 1024) this.lastRecorded.clear();
    this.lastRecorded.set(host, nowMs);
    const path = join(this.dir, DENIALS_FILE);
    try {
      if ((statSync(path, { throwIfNoEntry: false })?.size ?? 0) >= MAX_FILE_BYTES) {
        this.isFull = true;
        return;
      }
      appendFileSync(path, JSON.stringify({ at: nowMs, host } satisfies DenialRecord) + '\n', { mode: 0o600 });
    } catch {
      // The state directory is going away with the sandbox.
    }
  }
}

/**
 * The refusals recorded in `dir` from byte `offset` on (whole lines only, at most 64 KiB per
 * call) and the offset to read from next time. A missing file reads as none.
 */
export function readDenials(dir: string, offset: number): { records: DenialRecord[]; next: number } {
  let fd: number;
  try {
    fd = openSync(join(dir, DENIALS_FILE), 'r');
  } catch {
    return { records: [], next: offset };
  }
  try {
    const buf = Buffer.alloc(MAX_READ_BYTES);
    const n = readSync(fd, buf, 0, buf.length, offset);
    const text = buf.subarray(0, n).toString('utf8');
    const end = text.lastIndexOf('\n') + 1;
    const records: DenialRecord[] = [];
    for (const line of text.slice(0, end).split('\n')) {
      if (!line) continue;
      try {
        const r = JSON.parse(line) as DenialRecord;
        if (typeof r.at === 'number' && typeof r.host === 'string') records.push({ at: r.at, host: r.host });
      } catch {
        // Not ours: skipped.
      }
    }
    return { records, next: offset + Buffer.byteLength(text.slice(0, end)) };
  } finally {
    closeSync(fd);
  }
}
