// The marks a cancel, or an `input` with eof, leaves in a task's directory before it signals the
// task's supervisor. A supervisor may be reused (warm-supervisor.ts): a signal sent just as the
// task it meant ended could reach that supervisor while it runs the next one. A signal carries no
// task id, so a reused supervisor acts on one only when its current task's directory holds the mark.
import { closeSync, existsSync, openSync } from 'node:fs';
import { join } from 'node:path';

/** Each mark's name in the task directory. */
export const ASKED_MARKS = { cancel: 'cancel.asked', eof: 'eof.asked' } as const;

/** Leaves the mark of `what` in `dir`; false when it could not be made (a full state directory, say). */
export function markAsked(dir: string, what: keyof typeof ASKED_MARKS): boolean {
  try {
    closeSync(openSync(join(dir, ASKED_MARKS[what]), 'a', 0o600));
    return true;
  } catch {
    return false;
  }
}

/** True when the task in `dir` was asked for `what`. */
export function isAsked(dir: string, what: keyof typeof ASKED_MARKS): boolean {
  return existsSync(join(dir, ASKED_MARKS[what]));
}
