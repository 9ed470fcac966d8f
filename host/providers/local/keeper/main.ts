// Entry of dist/keeper.js: `node dist/keeper.js <sandbox dir>`. Kept apart from the server's
// entry so that each per-sandbox keeper loads only what it needs (see keeper.ts).
import { runKeeper } from './keeper.js';

await runKeeper(process.argv.slice(2));
