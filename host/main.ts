// The bin entry, kept tiny: the CLI and its SDKs live in code-split chunks, so the E2B SDK
// (about 0.3 s of start-up) is only loaded when an e2b sandbox is first used.
import { keepInspectorClosed } from './util/inspector-signal.js';

// First: SIGUSR1 must never open a debugger in the server (see inspector-signal.ts).
keepInspectorClosed();
const { runCli } = await import('./cli/run.js');
await runCli(process.argv.slice(2));
