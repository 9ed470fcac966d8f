// A fault outside any request — an exception thrown from a timer or an event listener, a promise
// rejected with nobody to handle it — would end the server at once, silently, leaving its
// session's sandboxes running. Instead it is logged in one line (the error's class only: a
// message may hold values), the server runs the shutdown a SIGTERM runs, and the process exits
// nonzero. The cleanup is bounded: the state that faulted may keep it from ever finishing.
import type { Logger } from '../util/log.js';

/** The exit code of a server that ended because of a fault (EX_SOFTWARE). */
export const FAULT_EXIT_CODE = 70;

/** How long the cleanup after a fault may take before the process exits anyway. */
export const FAULT_CLEANUP_BOUND_MS = 15_000;

/** What watchForFaults reports. */
export interface FaultWatch {
  /** Resolves with `uncaught_exception` or `unhandled_rejection` at the first fault; never rejects. */
  readonly happened: Promise<string>;
  /** The exit code for the server's end: FAULT_EXIT_CODE once a fault happened, else 0. */
  exitCode(): number;
}

/**
 * Handles every uncaught exception and unhandled rejection of this process from now on: the first
 * is logged and resolves `happened` (the caller then shuts down as on SIGTERM); a timer exits the
 * process with FAULT_EXIT_CODE if that shutdown has not done so within `boundMs`. Later faults,
 * during the cleanup, are not logged again.
 */
export function watchForFaults(log: Logger, boundMs = FAULT_CLEANUP_BOUND_MS): FaultWatch {
  let hasFaulted = false;
  let resolve!: (kind: string) => void;
  const happened = new Promise<string>((r) => (resolve = r));
  const onFault = (kind: string) => (e: unknown) => {
    if (hasFaulted) return;
    hasFaulted = true;
    log.warn('fault outside any request; cleaning up and exiting', { kind, error: e instanceof Error ? e.name : typeof e });
    // Not unref'd: this timer must end the process even when nothing else is left to run.
    setTimeout(() => process.exit(FAULT_EXIT_CODE), boundMs);
    resolve(kind);
  };
  process.on('uncaughtException', onFault('uncaught_exception'));
  process.on('unhandledRejection', onFault('unhandled_rejection'));
  return { happened, exitCode: () => (hasFaulted ? FAULT_EXIT_CODE : 0) };
}
