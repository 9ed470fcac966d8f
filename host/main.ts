// The bin entry. It stays tiny because the local provider's detached keepers run from this same
// file (`sandbox-mcp keeper <dir>`) with a 16 MB heap: they must not load the MCP or E2B SDKs,
// which live in a separately built chunk that only the CLI imports.
const argv = process.argv.slice(2);
if (argv[0] === 'keeper') {
  const { runKeeper } = await import('./providers/local/keeper.js');
  await runKeeper(argv.slice(1));
} else {
  const { runCli } = await import('./cli.js');
  await runCli(argv);
}
