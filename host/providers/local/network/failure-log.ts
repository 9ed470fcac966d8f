// How the egress proxy's failures reach the server's log: the proxy runs in the sandbox's keeper,
// which outlives servers and has no log of its own, so it appends one JSON line per failure — the
// time, the host and port asked for, the reason and, for a name that resolved to a non-public
// address, that address; nothing the request carried beyond its destination — to the sandbox's
// state directory, and the provider reads the lines it has not seen yet whenever it works on that
// sandbox (see FailureReporter in failure-reporter.ts). Bounded: a destination is recorded at most
// once a minute per reason, and the file stops growing at 256 KiB. That limit is the log's only:
// the notes on failed commands ask the keeper's memory (FailureMemory) first.
import { appendFileSync, closeSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { FAILURES_FILE } from '../sandbox/state-dir.js';
import { failureKey, parseFailureRecord, type EgressFailure, type EgressFailureRecord } from './egress-failures.js';

const MAX_FILE_BYTES = 256 * 1024;
const REPEAT_AFTER_MS = 60_000;
const MAX_READ_BYTES = 64 * 1024;

/** The keeper's side: records failures in the sandbox's state directory. */
export class FailureLog {
  private readonly lastRecorded = new Map<string, number>();
  private isFull = false;

  constructor(private readonly dir: string) {}

  /** Appends `failure` unless the same destination failed the same way in the last minute or the file is full; never throws. */
  record(failure: EgressFailure, nowMs = Date.now()): void {
    if (this.isFull) return;
    const key = failureKey(failure);
    const last = this.lastRecorded.get(key);
    if (last !== undefined && nowMs - last < REPEAT_AFTER_MS) return;
    if (this.lastRecorded.size >= 1024) this.lastRecorded.clear();
    this.lastRecorded.set(key, nowMs);
    const path = join(this.dir, FAILURES_FILE);
    try {
      if ((statSync(path, { throwIfNoEntry: false })?.size ?? 0) >= MAX_FILE_BYTES) {
        this.isFull = true;
        return;
      }
      appendFileSync(path, JSON.stringify({ at: nowMs, ...failure } satisfies EgressFailureRecord) + '\n', { mode: 0o600 });
    } catch {
      // The state directory is going away with the sandbox.
    }
  }
}

/**
 * The failures recorded in `dir` from byte `offset` on (whole lines only, at most 64 KiB per
 * call) and the offset to read from next time. A missing file reads as none.
 */
export function readFailures(dir: string, offset: number): { records: EgressFailureRecord[]; next: number } {
  const path = join(dir, FAILURES_FILE);
  // Asked after every command: most sandboxes have no failures, or none new. A stat that finds
  // nothing past `offset` spares the open (whose ENOENT was a thrown error each time) and the buffer.
  let size: number | undefined;
  try {
    size = statSync(path, { throwIfNoEntry: false })?.size;
  } catch {
    size = undefined;
  }
  if (size === undefined || size <= offset) return { records: [], next: offset };
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return { records: [], next: offset };
  }
  try {
    const buf = Buffer.alloc(MAX_READ_BYTES);
    const n = readSync(fd, buf, 0, buf.length, offset);
    const text = buf.subarray(0, n).toString('utf8');
    const end = text.lastIndexOf('\n') + 1;
    const records: EgressFailureRecord[] = [];
    for (const line of text.slice(0, end).split('\n')) {
      if (!line) continue;
      try {
        const r = parseFailureRecord(JSON.parse(line));
        if (r) records.push(r);
      } catch {
        // Not ours: skipped.
      }
    }
    return { records, next: offset + Buffer.byteLength(text.slice(0, end)) };
  } finally {
    closeSync(fd);
  }
}
