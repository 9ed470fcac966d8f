// stdio transport: one session for the life of the process. However it ends — EOF, a read or
// write error on stdin/stdout, SIGINT, SIGTERM or SIGHUP (the terminal closed) — the session's
// unretained sandboxes are destroyed, a log line says why, and the process exits.
import { createServer } from '../server.js';
import type { ServerDeps } from '../server-deps.js';
import { StdioTransport } from './stdio-transport.js';

/** The signals that end a server the way EOF ends a stdio session. */
export const SHUTDOWN_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/** Resolves with the first of SHUTDOWN_SIGNALS this process receives (each then stays handled: a second one does not kill the cleanup). */
export function shutdownSignal(): Promise<string> {
  return new Promise((resolve) => {
    for (const signal of SHUTDOWN_SIGNALS) process.on(signal, () => resolve(signal));
  });
}

/** Serves one MCP session on stdin/stdout until its input ends or a shutdown signal; resolves after cleanup. */
export async function serveStdio(deps: ServerDeps): Promise<void> {
  const { server, connect, close } = createServer(deps);
  const transport = new StdioTransport({ onRefused: (reason) => deps.log.info('refused a message', { reason }) });
  await connect(transport);
  deps.log.info('serving stdio');
  const reason = await Promise.race([transport.ended, shutdownSignal()]);
  deps.log.info('stdio session ending', { reason });
  await close();
  await server.close().catch(() => undefined);
}
