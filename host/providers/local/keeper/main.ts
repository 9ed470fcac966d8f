// Entry of dist/keeper.js: `node dist/keeper.js <sandbox dir>`. Kept apart from the server's
// entry so that each per-sandbox keeper loads only what it needs (see keeper.ts). The keeper
// starts the same script as its netns helper (network/netns-helper.ts), with NETNS_HELPER_ARG.
import { keepInspectorClosed } from '../../../util/inspector-signal.js';
import { NETNS_HELPER_ARG, runNetnsHelper } from '../network/netns-helper.js';
import { runKeeper } from './keeper.js';

// Before anything else, and for good: SIGUSR1 (a server's "re-read the deadline") must never
// open a debugger, not even while the keeper shuts down (see inspector-signal.ts).
keepInspectorClosed();
const args = process.argv.slice(2);
if (args[0] === NETNS_HELPER_ARG) runNetnsHelper();
else await runKeeper(args);
