// The signals that end the server the way EOF ends a stdio session: SIGINT, SIGTERM, and SIGHUP
// (the terminal closed), whose default would kill the process before its cleanup.

/** The signals that end a server with its cleanup. */
export const SHUTDOWN_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Resolves with the first of SHUTDOWN_SIGNALS this process receives (each then stays handled: a second one does not kill the cleanup). */
export function shutdownSignal(): Promise<string> {
  return new Promise((resolve) => {
    for (const signal of SHUTDOWN_SIGNALS) process.on(signal, () => resolve(signal));
  });
}
