// Entry of dist/keeper.cjs: `node dist/keeper.cjs <sandbox dir>`. Kept apart from the server's
// entry so that each per-sandbox keeper loads only what it needs (see keeper.ts). The keeper
// starts the same script as its netns helper (network/netns-helper.ts), with NETNS_HELPER_ARG.
// Built as CommonJS (build/build.mjs), so no top-level await: a failure still ends the process
// at once with status 1 and its stack on stderr, as the awaited promise's rejection did.
import { keepInspectorClosed } from '../../../util/inspector-signal.js';
import { NETNS_HELPER_ARG, runNetnsHelper } from '../network/netns-helper.js';
import { runKeeper } from './keeper.js';

// Before anything else, and for good: SIGUSR1 (a server's "re-read the deadline") must never
// open a debugger, not even while the keeper shuts down (see inspector-signal.ts).
keepInspectorClosed();
const args = process.argv.slice(2);
if (args[0] === NETNS_HELPER_ARG) runNetnsHelper();
else
  runKeeper(args).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
