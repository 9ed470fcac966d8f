// Placeholder CLI; the MCP server replaces the default branch. `keeper` is the local
// provider's detached keeper process (see host/providers/local/).
declare const __HOST_VERSION__: string;
const [command] = process.argv.slice(2);
if (command === '--help' || command === '-h') {
  process.stdout.write(`sandbox-mcp ${__HOST_VERSION__}\nUsage: sandbox-mcp [--help]\n`);
} else if (command === 'keeper') {
  const { runKeeper } = await import('./providers/local/keeper.js');
  await runKeeper(process.argv.slice(3));
}
