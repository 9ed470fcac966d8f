// Where the agent's Node.js runtime is inside a local sandbox: the server's own node, the dynamic
// loader it was built for and the libraries it links, bound read-only at one fixed path in every
// sandbox, so the agent runs on the server's Node.js line whatever the sandbox's root holds (a root
// with no node, or no libc at all). node runs through the loader (`ld.so --library-path lib node …`),
// which makes the loader the process's executable: a node process that starts node again must give
// the loader the same arguments (nodeRelaunch). Shared by the host, which builds and binds the
// runtime, and the agent, which starts its supervisors with it.
import { posix } from 'node:path';

/** The runtime's directory inside every local sandbox (read-only). */
export const AGENT_RUNTIME_DIR = '/.sandbox-mcp/runtime';

/**
 * The runtime's entries, relative to its directory: node alone in `bin/` (a base sandbox, whose
 * /usr is the host's, may run it directly and puts it last on PATH), the libraries in `lib/` with
 * the loader.
 */
export const AGENT_RUNTIME_NODE = 'bin/node';
export const AGENT_RUNTIME_LIB = 'lib';
export const AGENT_RUNTIME_LOADER = 'lib/ld.so';

const LOADER_PATH = posix.join(AGENT_RUNTIME_DIR, AGENT_RUNTIME_LOADER);
const RUN_NODE = ['--library-path', posix.join(AGENT_RUNTIME_DIR, AGENT_RUNTIME_LIB), posix.join(AGENT_RUNTIME_DIR, AGENT_RUNTIME_NODE)];

/** The argv that runs the runtime's node with `args` inside a sandbox. */
export function agentRuntimeArgv(args: readonly string[] = []): string[] {
  return [LOADER_PATH, ...RUN_NODE, ...args];
}

/**
 * How a node process whose executable is `execPath` starts node again with `args`: itself, or,
 * when it runs as the runtime's loader, the loader with the library path and node first.
 */
export function nodeRelaunch(execPath: string, args: readonly string[]): { file: string; args: string[] } {
  return { file: execPath, args: execPath === LOADER_PATH ? [...RUN_NODE, ...args] : [...args] };
}

/**
 * What a node process was given after node itself, its script first, from its argv: `node SCRIPT …`,
 * or `ld.so --library-path lib node SCRIPT …` when it runs on the runtime (the host reads the
 * agent's processes this way).
 */
export function nodeScriptArgs(argv: readonly string[]): string[] {
  const runtime = agentRuntimeArgv();
  return argv.slice(runtime.every((a, i) => argv[i] === a) ? runtime.length : 1);
}

/**
 * Node's compile cache for the agent's own node processes (Node 22+; the keeper starts the
 * resident with it, and the supervisors the resident boots inherit it): the agent's, never a
 * command's, whose node would fill the agent's cache folder with its own scripts.
 */
export const AGENT_COMPILE_CACHE_VAR = 'NODE_COMPILE_CACHE';

/**
 * `node -e` text (no single quote) installing the agent with node alone, for a root without the
 * programs a shell would use (mkdir, cat, mv): writes stdin beside argv[1] under a temporary name
 * and renames it there (another process never runs a half-written agent).
 */
export const AGENT_INSTALL_WITH_NODE =
  'const fs = require("fs"); const f = process.argv[1]; const t = f + "." + process.pid; ' +
  'fs.mkdirSync(require("path").dirname(f), { recursive: true }); fs.writeFileSync(t, fs.readFileSync(0)); fs.renameSync(t, f);';
