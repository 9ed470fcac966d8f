// One line of the doctor's report: what was checked, how it went, and the fix when it did not.

/** ok: works; warn: works with less (a feature is missing); fail: local sandboxes cannot work. */
export type CheckStatus = 'ok' | 'warn' | 'fail';

/** One check's outcome; `fix` is one line a person can act on. */
export interface Check {
  name: string;
  status: CheckStatus;
  message: string;
  fix?: string;
}

/** A passed check. */
export function ok(name: string, message: string): Check {
  return { name, status: 'ok', message };
}

/** A check that passed with less than everything, and how to get the rest. */
export function warn(name: string, message: string, fix: string): Check {
  return { name, status: 'warn', message, fix };
}

/** A failed check and its fix. */
export function fail(name: string, message: string, fix: string): Check {
  return { name, status: 'fail', message, fix };
}
