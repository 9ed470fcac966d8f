// The server's side of the egress proxy's refusals (denial-log.ts): after working on a sandbox,
// the provider hands the refusals it has not reported yet to a listener (the server logs the
// host name). Each server process reads every sandbox's record from its start, so a restarted
// server reports earlier refusals once more, with the time they happened.
import { join } from 'node:path';
import { isSandboxId } from '../sandbox/ids.js';
import { readDenials } from './denial-log.js';

/** One refusal of a sandbox's egress proxy: the host it asked for, and when. */
export interface NetworkDenial {
  sandboxId: string;
  host: string;
  atMs: number;
}

/** Hears each refusal once per server process. */
export type NetworkDenialListener = (denial: NetworkDenial) => void;

/** Reports refusals recorded in the sandboxes directory `sandboxes` to `listener`. */
export class DenialReporter {
  private readonly offsets = new Map<string, number>();

  constructor(
    private readonly sandboxes: string,
    private readonly listener: NetworkDenialListener | undefined,
  ) {}

  /** Hands the sandbox's refusals not reported yet to the listener; never throws. */
  report(sandboxId: string): void {
    if (!this.listener || !isSandboxId(sandboxId)) return;
    try {
      const { records, next } = readDenials(join(this.sandboxes, sandboxId), this.offsets.get(sandboxId) ?? 0);
      this.offsets.set(sandboxId, next);
      for (const r of records) this.listener({ sandboxId, host: r.host, atMs: r.at });
    } catch {
      // Reporting must never fail the operation it follows.
    }
  }

  /** Forgets a sandbox that is gone. */
  forget(sandboxId: string): void {
    this.offsets.delete(sandboxId);
  }
}
