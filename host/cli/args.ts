// The command line: its commands, its options (and which command each applies to), the help text
// that documents them, and a parser that names what is wrong (an unknown option, a flag given to
// a command it does not apply to, a missing value) without ever echoing a value.
import { parseArgs } from 'node:util';
import { LIMITS, RESIDENT_IDLE_EXIT_DEFAULT_S } from '../../shared/limits.js';
import { OP_NAMES } from '../../shared/protocol.js';
import { LIMIT_OPTIONS, limitOptionsHelp, type LimitFlag } from '../config/limit-options.js';
import { definedFields } from '../util/defined-fields.js';
import { HOST_VERSION } from '../config/version.js';

/** What the command line asks for; `stdio` is the bare `sandbox-mcp`. */
export const COMMANDS = [
  'stdio',
  'http',
  'doctor',
  'token-hash',
  'agent',
  'selftest',
  'ls',
  'logs',
  'shell',
  'kill',
  'cancel',
  'network',
  'diff',
  'apply',
  'template',
  'snapshot',
  'dashboard',
] as const;
export type CommandName = (typeof COMMANDS)[number];

interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /** The commands the option applies to; any other command refuses it. */
  commands: readonly CommandName[];
}

const SERVING: readonly CommandName[] = ['stdio', 'http'];

// The limit flags apply wherever a local provider is built: serving, and the doctor's check sandbox.
const LIMIT_FLAG_SPECS = Object.fromEntries(
  LIMIT_OPTIONS.map((o): [LimitFlag, OptionSpec] => [o.flag, { type: 'string', commands: [...SERVING, 'doctor'] }]),
) as Record<LimitFlag, OptionSpec>;

/** Every option, by long name. */
export const OPTIONS = {
  ...LIMIT_FLAG_SPECS,
  help: { type: 'boolean', short: 'h', commands: COMMANDS },
  version: { type: 'boolean', commands: COMMANDS },
  provider: { type: 'string', commands: COMMANDS },
  'keep-sandboxes': { type: 'boolean', commands: SERVING },
  'network-allow': { type: 'string', multiple: true, commands: [...SERVING, 'network'] },
  'network-default': { type: 'string', commands: [...SERVING, 'network'] },
  'background-after': { type: 'string', commands: SERVING },
  'workspace-allow': { type: 'string', multiple: true, commands: SERVING },
  host: { type: 'string', commands: ['http'] },
  port: { type: 'string', commands: ['http', 'dashboard'] },
  'no-dashboard': { type: 'boolean', commands: ['http'] },
  'idle-timeout': { type: 'string', commands: ['http'] },
  'allowed-host': { type: 'string', multiple: true, commands: ['http'] },
  'tokens-file': { type: 'string', commands: ['http'] },
  json: { type: 'boolean', commands: ['doctor', 'ls', 'logs', 'kill', 'cancel', 'template', 'snapshot', 'diff', 'apply'] },
  worktree: { type: 'boolean', commands: ['apply'] },
  'keep-apt-cache': { type: 'boolean', commands: ['snapshot'] },
  raw: { type: 'boolean', commands: ['diff'] },
  follow: { type: 'boolean', short: 'f', commands: ['logs'] },
  stderr: { type: 'boolean', commands: ['logs'] },
  from: { type: 'string', commands: ['logs'] },
  'template-dir': { type: 'string', commands: [...SERVING, 'doctor', 'template', 'snapshot'] },
  'sandbox-ro-bind': { type: 'string', multiple: true, commands: [...SERVING, 'doctor'] },
  'max-snapshot-storage': { type: 'string', commands: [...SERVING, 'snapshot'] },
  packages: { type: 'string', commands: ['template'] },
  suite: { type: 'string', commands: ['template'] },
  'package-cache': { type: 'string', commands: ['template'] },
  mirror: { type: 'string', commands: ['template'] },
} as const satisfies Record<string, OptionSpec>;
type OptionName = keyof typeof OPTIONS;

/** `sandbox-mcp --help`: every command, flag and environment variable (docs/configuration.md's table matches it). */
export const HELP = `sandbox-mcp ${HOST_VERSION} — an MCP server for sandboxes with reconnectable background tasks

Usage:
  sandbox-mcp [--provider local|e2b] [--keep-sandboxes] [--background-after S]
        Serve MCP over stdio: one session, for an MCP client that starts this command. When
        the client disconnects, the sandboxes the session created are destroyed, except those
        a task was started in (and all of them with --keep-sandboxes).
  sandbox-mcp http [--host 127.0.0.1] [--port 8765] [--idle-timeout 1800]
                   [--allowed-host NAME[:PORT]]... [--tokens-file FILE] [--provider local|e2b]
                   [--keep-sandboxes] [--background-after S]
        Serve Streamable HTTP at /mcp: a bearer token is required; Host/Origin must name the
        bound address or an --allowed-host (a wildcard --host needs --allowed-host). With
        --tokens-file, each named principal sees only its own sandboxes. The dashboard (a web
        page: sandboxes, tasks, live output) is at /: sign in with a token; --no-dashboard
        leaves it out.
  sandbox-mcp doctor [--json] [--provider local|e2b]
        Check this machine for local sandboxes (Node.js, bubblewrap, user namespaces, nsenter,
        setpriv, cgroups, the state directory, a real sandbox running node and python3) and
        E2B credentials; one ok/warn/fail line each, with the fix. Exit 0 only when local
        sandboxes work.
  sandbox-mcp token-hash
        Read a token on stdin and print the hash a tokens file holds for it.
  sandbox-mcp agent <sandbox_id> <op> [json]
        Send one raw agent protocol request and print the raw response line (op: one of
        ${OP_NAMES.join(', ')}; json: extra fields).
  sandbox-mcp selftest <sandbox_id>
        Run the agent's selftest inside a sandbox.
  sandbox-mcp network [sandbox_id]
        Print (as JSON) the network this configuration gives sandboxes, or one sandbox's:
        its egress allow-list, the proxy its commands use, and its exposed ports.
  sandbox-mcp --help | --version

Watching agents (no running server needed; ids as the tools return them, e.g. local:abc):
  sandbox-mcp ls [--json] [--provider local|e2b]
        The provider's sandboxes (template, state, started, ends, limits), each with its tasks
        (state, exit code, started, duration, output sizes; + = cut at the 1 MiB cap).
        Colour only on a terminal, never with NO_COLOR.
  sandbox-mcp logs <sandbox_id> <task_id> [--follow] [--stderr] [--from N] [--json]
        Print a task's output. At the end its state goes to stderr. Exit status: the task's
        exit code once it ended (0 while it still runs, without --follow), 124 timed out,
        125 cancelled, 123 outcome unknown, 130 stopped following with Ctrl-C (never the task).
        A stream over the 1 MiB cap: once the task has ended, its last 32 KiB follow its first
        MiB, after a gap line on stderr.
        --json: JSON Lines, {"stream","offset","text"} per piece of output (offset: the byte
        it starts at, for --from), {"stream","tail"} for such a stream's last 32 KiB, then
        {"state","exit_code","next_offset"} (none after Ctrl-C).
  sandbox-mcp shell <sandbox_id> [-- command...]
        An interactive terminal in the sandbox, as run_command's user and environment, on a
        fresh pseudo-terminal (yours is never handed in); exits with the shell's status. A
        command after -- runs instead of the shell (local sandboxes only: E2B's terminal runs
        only its shell). Needs node-pty (@lydell/node-pty).
  sandbox-mcp snapshot <sandbox_id> NAME [--keep-apt-cache] [--json]
        Save the files of a running local sandbox made from a template as a new template NAME
        (as the snapshot_sandbox tool does); it keeps running. Processes and tasks are not
        carried over, nor apt's downloaded lists and .deb archives unless --keep-apt-cache.
        --json: the new template's name, size and time.
  sandbox-mcp dashboard [--port N] [--provider local|e2b]
        The dashboard alone, for stdio users: served on 127.0.0.1 (a free port unless --port),
        signed in with a one-time link printed to stderr (it works once, for 10 minutes; press
        Enter for a new one). It sees every sandbox of this state directory (and E2B account).
  sandbox-mcp kill <sandbox_id> [--json]
        Destroy a sandbox. --json: {"sandbox_id","killed":true}.
  sandbox-mcp cancel <sandbox_id> <task_id> [--json]
        Cancel a task: TERM, then KILL, to its process group. Exit 1 if its end is not
        confirmed. --json: {"sandbox_id","task_id","state","exit_code","confirmed"}.
  sandbox-mcp diff <sandbox_id> [--raw] [--json]
        What a sandbox changed in its workspace (create_sandbox's workspace): a unified diff
        (coloured on a terminal), then the binary and large files it does not show and the
        paths the host changed since create. Control characters in the files are shown
        escaped (\\e, \\r, \\x7f); --raw, not on a terminal, prints them as they are (for
        git apply). --json: the changes and the patch as one object.
  sandbox-mcp apply <sandbox_id> [--worktree] [--json]
        Take those changes onto the host. In a git repository: one commit on a new branch
        sandbox/<short id>, the working tree and index untouched (git merge takes it). With
        --worktree, or in a plain directory: the changed files are written into it, refused
        (naming them, nothing written) where the host changed a file since create.
  Errors print the tools' category and suggestion and exit 1; a bad command line exits 2.
  With --json too: errors stay on stderr, stdout carries only the JSON.

Templates of local sandboxes (root filesystems create_sandbox's template names; docs/templates.md):
  sandbox-mcp template build NAME [--packages LIST] [--suite S] [--mirror URL]
                               [--package-cache DIR]
        Build a Debian root filesystem with mmdebstrap (needs root; fetches from
        deb.debian.org): the apt variant plus LIST (comma-separated packages). Progress on a
        terminal; a failed or interrupted build leaves nothing behind.
  sandbox-mcp template import NAME FILE.tar|DIR
        Make a template of a root filesystem: a tar archive (what docker export or podman
        export writes, compressed or not) or a directory.
  sandbox-mcp template ls [--json]
        The templates: name, source, size, creation time and the live sandboxes on each.
  sandbox-mcp template inspect NAME
        One template's record, as JSON.
  sandbox-mcp template rm NAME
        Remove a template (refused while a live sandbox runs on it).

Options:
  --provider local|e2b   default provider for create_sandbox and unqualified ids (env
                         SANDBOX_MCP_PROVIDER; default local)
  --keep-sandboxes       sandboxes outlive the session that created them, until their own
                         timeout (env SANDBOX_MCP_KEEP_SANDBOXES=1); for clients that start one
                         server process per call
  --background-after S   run_command/run_code calls that give no background_after use S
                         (0-3600 s): a call still running then returns a task handle; 0:
                         calls wait (env SANDBOX_MCP_BACKGROUND_AFTER; default 50, below a
                         60 s client cut)
  --host ADDR            http: address to bind (default 127.0.0.1; an IPv6 one with or
                         without brackets)
  --port N               http: port (default 8765; 0 picks a free one); dashboard: port
                         (default: a free one)
  --no-dashboard         http: serve /mcp only, no dashboard at /
  --idle-timeout S       http: a session with no request for S seconds ends (default 1800)
  --allowed-host NAME    http: a further Host/Origin name clients use (repeatable, or
                         comma-separated)
  --tokens-file FILE     http: named principals instead of one token: lines of
                         "name role sha256:<hex>" (role user: only its own sandboxes; admin:
                         all); the file must be this user's, mode 600 (env SANDBOX_MCP_TOKENS_FILE)
  --network-allow LIST   the egress create_sandbox's network.allow_out may ask for (repeatable,
                         or comma-separated): host names (exact, or *.suffix for subdomains)
                         or IPv4/[IPv6] addresses, each with an optional :port (without one:
                         80 and 443), or @packages (pypi, npm, cargo, go, gem and GitHub
                         hosts) or @debian (apt in a built template: deb.debian.org,
                         security.debian.org); default none (env SANDBOX_MCP_NETWORK_ALLOW)
  --network-default D    what a create_sandbox without network gets: provider (default: local
                         sandboxes none, e2b E2B's internet access), none, or allowed (the
                         whole --network-allow set) (env SANDBOX_MCP_NETWORK_DEFAULT)
  --workspace-allow DIRS the host directories (comma-separated or repeated; each with
                         everything below it) create_sandbox's workspace may name; symlinks
                         and .. are resolved first; default none: no workspaces (env
                         SANDBOX_MCP_WORKSPACE_ALLOW)
  --json                 doctor, ls, kill, cancel, diff, apply: print one JSON object (the
                         checks; the sandboxes and tasks; the outcome; the changes); logs:
                         JSON Lines (see logs)
  --worktree             apply: write into a git repository's working tree instead of
                         committing to a branch
  --keep-apt-cache       snapshot: keep apt's downloaded package lists and .deb archives,
                         which a snapshot leaves out by default
  --raw                  diff: control characters as they are, not escaped (ignored on a
                         terminal)
  --follow, -f           logs: keep printing as the output grows, until the task ends
  --stderr               logs: the task's stderr instead of its stdout
  --from N               logs: start at byte N of the stream (default 0)
  --template-dir DIR     where local templates are kept (env SANDBOX_MCP_TEMPLATE_DIR; default
                         templates in the state directory); must be private to this user
  --max-snapshot-storage N  MB of snapshots the templates directory may hold; a snapshot that
                         would pass it is refused (env SANDBOX_MCP_MAX_SNAPSHOT_STORAGE; default
                         10240; 0: none)
  --sandbox-ro-bind PATH  show host PATH read-only, at the same place, in every local sandbox
                         (repeatable; env SANDBOX_MCP_SANDBOX_RO_BIND, colon-separated); a
                         sandbox sees none of the host's files but its system directories
                         otherwise (docs/providers.md, "What a sandbox sees")
  --packages LIST        template build: Debian packages to add (comma-separated)
  --suite S              template build: the Debian suite (default stable)
  --mirror URL           template build: one Debian mirror, main only (default deb.debian.org,
                         with a stable suite's updates and security)
  --package-cache DIR    template build: keep the downloaded packages in DIR and reuse them

Resource limits of local sandboxes (each also a variable; a flag wins; docs/limits.md):
${limitOptionsHelp()}

Environment (a flag wins over its variable):
  SANDBOX_MCP_PROVIDER        as --provider
  SANDBOX_MCP_KEEP_SANDBOXES  1 = as --keep-sandboxes
  SANDBOX_MCP_BACKGROUND_AFTER  as --background-after
  SANDBOX_MCP_STATE_DIR       local provider state (default $XDG_STATE_HOME/sandbox-mcp, else
                              ~/.local/state/sandbox-mcp); an absolute path, private to this user
  SANDBOX_MCP_LOCAL_NETWORK   isolated (default: a local sandbox has only its own loopback) or
                              host (shares this machine's network, including its loopback
                              services)
  SANDBOX_MCP_NETWORK_ALLOW   as --network-allow (comma-separated)
  SANDBOX_MCP_NETWORK_DEFAULT as --network-default
  SANDBOX_MCP_WORKSPACE_ALLOW as --workspace-allow (comma-separated)
  SANDBOX_MCP_BWRAP           absolute path of the bubblewrap binary (default: bwrap on PATH)
  SANDBOX_MCP_RESIDENT_AGENT  0 = local sandboxes get no resident agent (every agent call and
                              command starts processes of its own, as with older servers)
  SANDBOX_MCP_RESIDENT_IDLE_EXIT_S  seconds without a call before a local sandbox's resident
                              agent exits (default ${RESIDENT_IDLE_EXIT_DEFAULT_S}; it starts again on the next call;
                              0 = it stays up)
  SANDBOX_MCP_SANDBOX_RO_BIND as --sandbox-ro-bind (colon-separated)
  SANDBOX_MCP_TOKEN           http: bearer token, 16+ characters of visible ASCII, no spaces
                              (default: generated, printed once to stderr); its holder sees
                              every sandbox
  SANDBOX_MCP_TOKENS_FILE     as --tokens-file
  SANDBOX_MCP_DEBUG           1 = debug lines in the log (stderr)
  E2B_API_KEY, E2B_DOMAIN     E2B credentials and domain (E2B_API_URL / E2B_SANDBOX_URL
                              override the endpoints)
Secrets: values of this server's environment variables whose names contain KEY, TOKEN, SECRET
or PASSWORD are masked in command and task output. Logs go to stderr only; stdout carries
nothing but the MCP protocol.
`;

/** A command line that cannot run; the message names the option or command, never a value. */
export class UsageError extends Error {}

/** The parsed command line. */
export interface CommandLine {
  command: CommandName;
  /** Positional arguments after the command (agent and selftest only). */
  args: string[];
  help: boolean;
  version: boolean;
  provider?: string;
  keepSandboxes: boolean;
  /** --background-after, raw: loadConfig validates it with its environment variable. */
  backgroundAfter?: string;
  host: string;
  port: number;
  idleTimeoutS: number;
  allowedHosts: string[];
  /** http: the tokens file of named principals (--tokens-file). */
  tokensFile?: string;
  /** --network-allow, each a comma-separated list (config.ts expands them). */
  networkAllow: string[];
  /** --workspace-allow, each a comma-separated list (config.ts resolves them). */
  workspaceAllow: string[];
  networkDefault?: string;
  json: boolean;
  /** http: serve no dashboard at / (--no-dashboard). */
  noDashboard: boolean;
  /** logs: keep printing until the task ends. */
  follow: boolean;
  /** logs: the stderr stream instead of stdout. */
  stderr: boolean;
  /** logs: the byte offset to start from. */
  fromByte: number;
  /** apply: into the working tree, not onto a branch. */
  worktree: boolean;
  /** snapshot: keep apt's downloaded lists and archives. */
  keepAptCache: boolean;
  /** diff: control characters unescaped (only when stdout is not a terminal). */
  raw: boolean;
  /** shell: the program after `--` (empty: the sandbox's shell). */
  program: string[];
  /** The limit flags given (by flag name; see LIMIT_OPTIONS). */
  limits: Record<string, string>;
  /** --template-dir, as given (loadConfig checks it with its variable). */
  templateDir?: string;
  /** --sandbox-ro-bind, each as given (loadConfig checks them). */
  sandboxRoBinds: string[];
  /** --max-snapshot-storage, raw (loadConfig validates it). */
  maxSnapshotStorage?: string;
  /** template build: --packages, raw (comma-separated). */
  packages?: string;
  /** template build: --suite. */
  suite?: string;
  /** template build: --package-cache. */
  packageCache?: string;
  /** template build: --mirror. */
  mirror?: string;
}

/** Option names are printed only when they look like one (never arbitrary text from argv). */
function printable(rawName: string): string | undefined {
  return /^--?[A-Za-z0-9][A-Za-z0-9-]{0,40}$/.test(rawName) ? rawName : undefined;
}

const ARITY: Record<CommandName, { min: number; max: number; usage: string }> = {
  stdio: { min: 0, max: 0, usage: 'sandbox-mcp [options]' },
  http: { min: 0, max: 0, usage: 'sandbox-mcp http [options]' },
  doctor: { min: 0, max: 0, usage: 'sandbox-mcp doctor [--json]' },
  'token-hash': { min: 0, max: 0, usage: 'sandbox-mcp token-hash < token' },
  agent: { min: 2, max: 3, usage: 'sandbox-mcp agent <sandbox_id> <op> [json]' },
  selftest: { min: 1, max: 1, usage: 'sandbox-mcp selftest <sandbox_id>' },
  ls: { min: 0, max: 0, usage: 'sandbox-mcp ls [--json] [--provider local|e2b]' },
  logs: { min: 2, max: 2, usage: 'sandbox-mcp logs <sandbox_id> <task_id> [--follow] [--stderr] [--from N] [--json]' },
  shell: { min: 1, max: 1, usage: 'sandbox-mcp shell <sandbox_id> [-- command...]' },
  kill: { min: 1, max: 1, usage: 'sandbox-mcp kill <sandbox_id> [--json]' },
  cancel: { min: 2, max: 2, usage: 'sandbox-mcp cancel <sandbox_id> <task_id> [--json]' },
  network: { min: 0, max: 1, usage: 'sandbox-mcp network [sandbox_id]' },
  diff: { min: 1, max: 1, usage: 'sandbox-mcp diff <sandbox_id> [--raw] [--json]' },
  apply: { min: 1, max: 1, usage: 'sandbox-mcp apply <sandbox_id> [--worktree] [--json]' },
  template: { min: 0, max: 3, usage: 'sandbox-mcp template build|import|ls|inspect|rm ... (see sandbox-mcp --help)' },
  snapshot: { min: 2, max: 2, usage: 'sandbox-mcp snapshot <sandbox_id> NAME [--keep-apt-cache] [--json]' },
  dashboard: { min: 0, max: 0, usage: 'sandbox-mcp dashboard [--port N]' },
};

/**
 * What a Host header can name: a host name (underscores too: container names), an IPv4 address or
 * a bracketed IPv6 one, with an optional port. A URL, a path or a space could never match one.
 */
const ALLOWED_HOST_PATTERN = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?)(?::(\d{1,5}))?$/;

/** --allowed-host's items (repeated, or comma-separated), each checked; a bad one is named by position, never quoted. */
function allowedHostsOption(values: readonly string[]): string[] {
  const items = values
    .flatMap((h) => h.split(','))
    .map((h) => h.trim())
    .filter(Boolean);
  for (const [index, item] of items.entries()) {
    const port = ALLOWED_HOST_PATTERN.exec(item)?.[1];
    if (!ALLOWED_HOST_PATTERN.test(item) || (port !== undefined && (Number(port) < 1 || Number(port) > 65535))) {
      throw new UsageError(`--allowed-host: item ${index + 1} is not a host name, IPv4 or [IPv6] address with an optional :port`);
    }
  }
  return items;
}

/**
 * --host's address as the listener takes it: an IPv6 one without the brackets a URL puts around
 * it (`[::1]`, as the printed URL shows it, binds ::1). Anything else is left to the bind, which
 * names --host when this machine has no such address.
 */
function hostOption(value: string | undefined): string {
  if (value === undefined) return '127.0.0.1';
  const inside = /^\[(.*)\]$/.exec(value)?.[1];
  if (inside === undefined) return value;
  if (!/^[0-9A-Fa-f:.]+$/.test(inside) || !inside.includes(':')) throw new UsageError('--host: only an IPv6 address goes in brackets');
  return inside;
}

function intOption(value: string | undefined, name: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  // Decimal digits only, as the limit flags take them: Number() alone reads 1e3, 0x10 and " 80".
  const n = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be an integer ${min}-${max}`);
  return n;
}

/** Parses argv (without node and the script); throws UsageError naming what is wrong. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  const { tokens } = parseArgs({ args: [...argv], options: OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const given = new Map<OptionName, string[]>();
  const positionals: string[] = [];
  // What follows `--`: shell's program; any other command takes it as ordinary arguments.
  let afterTerminator: string[] | undefined;
  for (const token of tokens) {
    if (token.kind === 'option-terminator') afterTerminator = [];
    if (token.kind === 'positional') (afterTerminator ?? positionals).push(token.value);
    if (token.kind !== 'option') continue;
    const spec = (OPTIONS as Record<string, OptionSpec>)[token.name];
    const shown = printable(token.rawName);
    if (!spec) throw new UsageError(shown ? `unknown option ${shown} (see sandbox-mcp --help)` : 'unknown option (see sandbox-mcp --help)');
    if (spec.type === 'string' && token.value === undefined) throw new UsageError(`--${token.name} needs a value`);
    if (spec.type === 'boolean' && token.value !== undefined) throw new UsageError(`--${token.name} takes no value`);
    const name = token.name as OptionName;
    if (!spec.multiple && given.has(name)) throw new UsageError(`--${name} is given more than once`);
    given.set(name, [...(given.get(name) ?? []), token.value ?? '']);
  }

  const [first, ...before] = positionals;
  let command: CommandName = 'stdio';
  if (first !== undefined) {
    if (first === 'stdio' || !(COMMANDS as readonly string[]).includes(first)) {
      const shown = /^[A-Za-z0-9_-]{1,40}$/.test(first) ? ` "${first}"` : '';
      throw new UsageError(`unknown command${shown} (see sandbox-mcp --help)`);
    }
    command = first as CommandName;
  }
  const program = command === 'shell' ? (afterTerminator ?? []) : [];
  const rest = command === 'shell' ? before : [...before, ...(afterTerminator ?? [])];
  const help = given.has('help');
  const version = given.has('version');
  if (!help && !version) {
    for (const name of given.keys()) {
      const applies = OPTIONS[name].commands as readonly CommandName[];
      if (!applies.includes(command)) {
        const where = applies.map((c) => (c === 'stdio' ? 'sandbox-mcp' : `sandbox-mcp ${c}`)).join(', ');
        throw new UsageError(`--${name} applies only to: ${where}`);
      }
    }
    const arity = ARITY[command];
    if (rest.length > 0 && arity.max === 0) throw new UsageError(`${command} takes no arguments (usage: ${arity.usage})`);
    if (rest.length < arity.min || rest.length > arity.max) throw new UsageError(`usage: ${arity.usage}`);
  }

  const one = (name: OptionName): string | undefined => given.get(name)?.[0];
  const provider = one('provider');
  const tokensFile = one('tokens-file');
  const networkDefault = one('network-default');
  const backgroundAfter = one('background-after');
  return {
    command,
    args: rest,
    help,
    version,
    ...definedFields({ provider, tokensFile, networkDefault }),
    networkAllow: given.get('network-allow') ?? [],
    workspaceAllow: given.get('workspace-allow') ?? [],
    sandboxRoBinds: given.get('sandbox-ro-bind') ?? [],
    ...definedFields({ provider, tokensFile, backgroundAfter }),
    keepSandboxes: given.has('keep-sandboxes'),
    host: hostOption(one('host')),
    // The dashboard takes a free port unless told: it prints its link, nobody configures it.
    port: intOption(one('port'), 'port', 0, 65535, command === 'dashboard' ? 0 : 8765),
    noDashboard: given.has('no-dashboard'),
    idleTimeoutS: intOption(one('idle-timeout'), 'idle-timeout', 1, 31_536_000, 1800),
    allowedHosts: allowedHostsOption(given.get('allowed-host') ?? []),
    json: given.has('json'),
    follow: given.has('follow'),
    stderr: given.has('stderr'),
    fromByte: intOption(one('from'), 'from', 0, LIMITS.streamCapBytes, 0),
    worktree: given.has('worktree'),
    keepAptCache: given.has('keep-apt-cache'),
    raw: given.has('raw'),
    program,
    limits: Object.fromEntries(LIMIT_OPTIONS.flatMap((o) => (given.has(o.flag) ? [[o.flag, one(o.flag)!]] : []))),
    ...definedFields({
      templateDir: one('template-dir'),
      maxSnapshotStorage: one('max-snapshot-storage'),
      packages: one('packages'),
      suite: one('suite'),
      packageCache: one('package-cache'),
      mirror: one('mirror'),
    }),
  };
}
