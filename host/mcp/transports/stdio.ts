// stdio transport: one session for the life of the process. However it ends — EOF, a read or
// write error on stdin/stdout, SIGINT, SIGTERM or SIGHUP (the terminal closed), a fault of the
// process (the caller's `stop`) — the session's unretained sandboxes are destroyed, a log line
// says why, and the process exits.
import { createServer } from '../server.js';
import type { ServerDeps } from '../server-deps.js';
import { StdioTransport } from './stdio-transport.js';

/** How a stdio session is told to end from outside, and told that it serves. */
export interface StdioOpts {
  /** Resolves with the reason when the server must stop (a shutdown signal, a fault). */
  stop: Promise<string>;
  /** Called once, as soon as the transport is up. */
  onServing?: () => void;
}

/** Serves one MCP session on stdin/stdout until its input ends or `stop` resolves; resolves after cleanup. */
export async function serveStdio(deps: ServerDeps, opts: StdioOpts): Promise<void> {
  const { server, connect, close } = createServer(deps, { transport: 'stdio' });
  const transport = new StdioTransport({ onRefused: (reason) => deps.log.info('refused a message', { reason }) });
  await connect(transport);
  deps.log.info('serving stdio');
  opts.onServing?.();
  const reason = await Promise.race([transport.ended, opts.stop]);
  deps.log.info('stdio session ending', { reason });
  await close();
  await server.close().catch(() => undefined);
}
