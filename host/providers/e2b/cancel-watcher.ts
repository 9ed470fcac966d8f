// Cancels a running envd command when an AbortSignal aborts. The SDK can only send SIGKILL, which
// the exec wrapper cannot trap, so CANCEL_SIGNAL goes to the wrapper's pid through a second envd
// command; the wrapper's trap then gives the command's process group TERM, then KILL. If the
// wrapper has not reported by the time its grace period and a settling time have passed (envd
// refused the signal, the wrapper is stuck), the watcher gives up: it SIGKILLs the wrapper and the
// outcome is unknown.
import type { CommandHandle, Sandbox } from 'e2b';
import { CANCEL_SIGNAL } from './exec-script.js';

/** The exit code `gaveUp` resolves to: the command's outcome is unknown. */
export const GAVE_UP_EXIT = -1;

/** A watch over one command; dispose it once the command has reported. */
export interface CancelWatch {
  /** True once the signal has aborted (the cancel was requested). */
  readonly isRequested: boolean;
  /** Resolves to GAVE_UP_EXIT `giveUpAfterMs` after the cancel was requested; never rejects. */
  readonly gaveUp: Promise<number>;
  /** Stops watching: no signal is sent and no timer is left after this. */
  dispose(): void;
}

/**
 * Watches `signal` for the command behind `handle` (the exec wrapper) in `sandbox`: on abort it
 * sends CANCEL_SIGNAL to the wrapper (that command is given `signalTimeoutMs`), and gives up
 * `giveUpAfterMs` later. An already aborted signal is acted on at once.
 */
export function watchCancel(
  sandbox: Sandbox,
  handle: CommandHandle,
  signal: AbortSignal,
  timing: { giveUpAfterMs: number; signalTimeoutMs: number },
): CancelWatch {
  let isRequested = false;
  let timer: NodeJS.Timeout | undefined;
  let resolveGaveUp: (code: number) => void = () => undefined;
  const gaveUp = new Promise<number>((resolve) => (resolveGaveUp = resolve));

  function giveUp(): void {
    // Best effort: the watcher reports the outcome, not these calls.
    handle.kill().catch(() => false);
    handle.disconnect().catch(() => undefined);
    resolveGaveUp(GAVE_UP_EXIT);
  }

  function onAbort(): void {
    if (isRequested) return;
    isRequested = true;
    timer = setTimeout(giveUp, timing.giveUpAfterMs);
    timer.unref();
    sandbox.commands.run(`kill -${CANCEL_SIGNAL} ${handle.pid}`, { timeoutMs: timing.signalTimeoutMs }).catch(() => undefined);
  }

  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  return {
    get isRequested() {
      return isRequested;
    },
    gaveUp,
    dispose() {
      signal.removeEventListener('abort', onAbort);
      if (timer) clearTimeout(timer);
    },
  };
}
