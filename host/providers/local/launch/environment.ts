// What a command finds inside a sandbox: its PATH, its proxy variables, and the shell preludes
// that source the caller's environment from a descriptor (never through the host-side helpers)
// and change into its working directory. Pure text, unit-tested.
import { realpathSync } from 'node:fs';
import { dirname, posix } from 'node:path';
import { AGENT_RUNTIME_DIR, AGENT_RUNTIME_NODE } from '../../../../shared/agent-runtime.js';
import { parseAllowList } from '../../network-policy.js';

/** The descriptor on which a command's environment reaches the sandbox (see envPrelude). */
export const ENV_FD = 4;

const ENV_VAR = '__sandbox_mcp_env';

/**
 * Shell text that runs `$1` as a command after the entry prelude (`entry`: cgroups, limits; see
 * limits/entry-prelude.ts) and after sourcing its environment from fd 4. The
 * environment the caller chooses must not reach the host-side helpers (nsenter, the cgroup
 * join): their dynamic loader would obey LD_PRELOAD, LD_DEBUG_OUTPUT and the like outside the
 * sandbox. A pipe also keeps values out of command lines, which every host user can read.
 * fd 4 is a socket (node's pipes are), which /dev/fd cannot reopen: bash reads it with its
 * `read` builtin (no extra process), other shells with theirs, a line at a time (a root may have no
 * cat; the loop ends at the pipe's end). `set --` inside the eval'd text
 * clears the positional parameters before the command runs.
 */
export function envPrelude(shell: string, entry = ''): string {
  const read = shell.endsWith('bash') ? `IFS= read -r -d '' -u ${ENV_FD} ${ENV_VAR}` : readLinesBuiltin();
  return `${entry}${read}; exec ${ENV_FD}<&-; [ -n "$${ENV_VAR}" ] || exit 125; eval "$${ENV_VAR}"; unset ${ENV_VAR}; eval "set --; $1"`;
}

/** POSIX shell text reading fd 4 to its end into ENV_VAR with builtins alone (exportScript's text ends with a newline). */
function readLinesBuiltin(): string {
  return `${ENV_VAR}=; while IFS= read -r __sandbox_mcp_line <&${ENV_FD}; do ${ENV_VAR}="$${ENV_VAR}$__sandbox_mcp_line\n"; done; unset __sandbox_mcp_line`;
}

/** `text` as one word of POSIX shell, single-quoted. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** Shell text exporting `env` (names already validated as identifiers), for envPrelude to source. */
export function exportScript(env: Readonly<Record<string, string>>): string {
  const lines = Object.entries(env).map(([name, value]) => `export ${name}=${shellQuote(value)}`);
  // A read-only name (bash's UID, SHELLOPTS…) fails its export, as the environment would be ignored; not the whole source.
  return lines.join('\n') + '\n:\n';
}

/** Changes into `$1` (reporting success with one byte on fd 3), then execs the rest unchanged. */
export const CHDIR_SCRIPT = 'cd -- "$1" 2>/dev/null || exit 1; printf . >&3; exec 3>&-; shift; exec "$@"';

/** The directories of the node binary at `nodePath`, as given and resolved: put on a sandbox's PATH. */
export function nodeBinDirsOf(nodePath: string): string[] {
  const dirs = new Set<string>([dirname(nodePath)]);
  try {
    dirs.add(dirname(realpathSync(nodePath)));
  } catch {
    // The path itself is enough.
  }
  return [...dirs];
}

/**
 * PATH inside a sandbox of this kind: a template's holds only its own directories (one without
 * node has none); a base sandbox's ends with the agent runtime's bin/ (the server's node, for a
 * host whose node is not under /usr); a sandbox from before the runtime, with the host's node directories.
 */
export function sandboxPathFor(kind: { isTemplate: boolean; hasRuntime: boolean }, hostNodeDirs: readonly string[]): string {
  if (kind.isTemplate) return sandboxPath();
  return kind.hasRuntime ? sandboxPath([AGENT_RUNTIME_BIN]) : sandboxPath(hostNodeDirs);
}

/** The agent runtime's directory holding node (shared/agent-runtime.ts). */
const AGENT_RUNTIME_BIN = posix.dirname(posix.join(AGENT_RUNTIME_DIR, AGENT_RUNTIME_NODE));

/** The default PATH inside a sandbox, plus extra directories (node's bin) when not already there. */
export function sandboxPath(extraDirs: readonly string[] = []): string {
  const dirs = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  for (const dir of extraDirs) if (!dirs.includes(dir)) dirs.push(dir);
  return dirs.join(':');
}

/** The port of the egress proxy on a sandbox's own 127.0.0.1 (its own network namespace: no two sandboxes share it). */
export const SANDBOX_PROXY_PORT = 3128;

/** The sandbox's own loopback names, which commands reach directly (NO_PROXY) unless listed. */
const OWN_LOOPBACK = ['localhost', '127.0.0.1', '::1'] as const;

/**
 * The proxy variables of a sandbox with an egress allow-list (none without one), in the upper- and
 * lower-case forms different tools read. The sandbox's own loopback is not proxied — except a
 * name or address the allow-list names: that one means the host's, reached through the proxy.
 */
export function proxyEnvironment(allowOut: readonly string[] | undefined): Record<string, string> {
  if (!allowOut || allowOut.length === 0) return {};
  const named = new Set(parseAllowList(allowOut).map((e) => e.host));
  const url = `http://127.0.0.1:${SANDBOX_PROXY_PORT}`;
  const noProxy = OWN_LOOPBACK.filter((h) => !named.has(h)).join(',');
  return {
    HTTP_PROXY: url,
    HTTPS_PROXY: url,
    NO_PROXY: noProxy,
    http_proxy: url,
    https_proxy: url,
    no_proxy: noProxy,
  };
}
