// Placeholder CLI; replaced by the MCP server.
declare const __HOST_VERSION__: string;
if (process.argv.includes('--help')) {
  process.stdout.write(`sandbox-mcp ${__HOST_VERSION__}\nUsage: sandbox-mcp [--help]\n`);
}
