// Readiness by polling, with a ceiling for a broken run: never a timing assertion.

/**
 * Polls `probe` until it returns a truthy value, and returns that value; throws naming `what`
 * after `timeoutMs` (a bound for a broken run, generous enough for a loaded machine).
 */
export async function waitFor<T>(probe: () => T | Promise<T>, what: string, timeoutMs = 30_000, intervalMs = 50): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new WaitTimedOut(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** What waitFor throws when its ceiling passes. */
export class WaitTimedOut extends Error {}

/** For a waitFor's catch that takes a timeout as "not this time": undefined for it, any other error (a broken probe) thrown. */
export function unlessTimedOut(err: unknown): undefined {
  if (err instanceof WaitTimedOut) return undefined;
  throw err;
}

/** Resolves after `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
