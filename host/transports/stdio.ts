// stdio transport: one session for the life of the process. On EOF (or SIGINT/SIGTERM) the
// session's unretained sandboxes are destroyed and the process exits.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createServer } from '../server.js';
import type { ServerDeps } from '../tools/tool.js';

/** Serves one MCP session on stdin/stdout until EOF; resolves after cleanup. */
export async function serveStdio(deps: ServerDeps): Promise<void> {
  const { server, close } = createServer(deps, { transport: 'stdio' });
  const transport = new StdioServerTransport();
  await server.connect(transport);
  deps.log.info('serving stdio');
  await new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await close();
  await server.close().catch(() => undefined);
}
