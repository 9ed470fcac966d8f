// stdio transport: one session for the life of the process. However it ends — EOF, a read or
// write error on stdin/stdout, SIGINT, SIGTERM or SIGHUP (the terminal closed) — the session's
// unretained sandboxes are destroyed, a log line says why, and the process exits.
import { createServer } from '../server.js';
import { shutdownSignal } from '../shutdown-signal.js';
import type { ServerDeps } from '../server-deps.js';
import { StdioTransport } from './stdio-transport.js';

/** Serves one MCP session on stdin/stdout until its input ends or a shutdown signal; resolves after cleanup. */
export async function serveStdio(deps: ServerDeps): Promise<void> {
  const { server, connect, close } = createServer(deps, { transport: 'stdio' });
  const transport = new StdioTransport({ onRefused: (reason) => deps.log.info('refused a message', { reason }) });
  await connect(transport);
  deps.log.info('serving stdio');
  const reason = await Promise.race([transport.ended, shutdownSignal()]);
  deps.log.info('stdio session ending', { reason });
  await close();
  await server.close().catch(() => undefined);
}
