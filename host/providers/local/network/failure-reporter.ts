// The server's side of the egress proxy's failure file (failure-log.ts): after working on a
// sandbox, the provider hands the failures it has not reported yet to a listener (the server logs
// them). Each server process reads every sandbox's record from its start, so a restarted server
// reports earlier failures once more, with the time they happened.
import { join } from 'node:path';
import { isSandboxId } from '../sandbox/ids.js';
import type { EgressFailure } from './egress-failures.js';
import { readFailures } from './failure-log.js';

/** One request a sandbox's egress proxy refused or could not get through, and when. */
export interface EgressFailureReport extends EgressFailure {
  sandboxId: string;
  atMs: number;
}

/** Hears each recorded failure once per server process. */
export type EgressFailureListener = (failure: EgressFailureReport) => void;

/** Reports failures recorded in the sandboxes directory `sandboxes` to `listener`. */
export class FailureReporter {
  private readonly offsets = new Map<string, number>();

  constructor(
    private readonly sandboxes: string,
    private readonly listener: EgressFailureListener | undefined,
  ) {}

  /** Hands the sandbox's failures not reported yet to the listener; never throws. */
  report(sandboxId: string): void {
    if (!this.listener || !isSandboxId(sandboxId)) return;
    try {
      const { records, next } = readFailures(join(this.sandboxes, sandboxId), this.offsets.get(sandboxId) ?? 0);
      this.offsets.set(sandboxId, next);
      for (const { at, ...failure } of records) this.listener({ sandboxId, atMs: at, ...failure });
    } catch {
      // Reporting must never fail the operation it follows.
    }
  }

  /** Forgets a sandbox that is gone. */
  forget(sandboxId: string): void {
    this.offsets.delete(sandboxId);
  }
}
