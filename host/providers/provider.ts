// The provider contract: the one interface every sandbox provider implements, and the facts both
// providers and the tools share (the sandbox home and its path rule, lifetime bounds, the default
// output cap, network modes, exposed port bounds, the cancelled-before-start error). Each fact is written here once.
// Ids here are the provider's own (unqualified); the tool layer adds and strips the `provider:`
// prefix. Every method throws only ProviderError (provider-error.ts): the provider maps its failures
// once, at this boundary. exec runs with the sandbox's environment (its create envs plus per-call
// envs) and HOME set to SANDBOX_HOME, so `$HOME/...` works in commands.
import { posix } from 'node:path';
import type { AgentRequestInput, AgentResponse, OpName, TaskView } from '../../shared/protocol.js';
import type { ResidentHello } from '../../shared/resident.js';
import { ProviderError } from './provider-error.js';
import type { NetworkPolicy } from './network-policy.js';

/** The sandbox user's home directory on every provider: $HOME, and where relative paths resolve. */
export const SANDBOX_HOME = '/home/user';

/**
 * The one path rule of every provider, for file paths and working directories: `~` and `~/…` are
 * the home, other relative paths (`x`, `./x`, `../x`) resolve against the home, absolute paths
 * stay; `.` and `..` are normalised away. Only a leading `~` is special (`a/~` is a name). Throws
 * invalid_argument for a NUL byte, which no path may hold.
 */
export function resolveSandboxPath(path: string): string {
  if (path.includes('\0')) throw new ProviderError('invalid_argument', { detail: 'The path contains a NUL byte.' });
  // `./` keeps what follows `~/` relative even when it starts with more slashes (`~//x`).
  const fromHome = path === '~' ? '.' : path.startsWith('~/') ? `./${path.slice(2)}` : path;
  return posix.resolve(SANDBOX_HOME, fromHome);
}

/** Sandbox lifetimes, in seconds: the accepted bounds and the default every provider applies when create names none. */
export const SANDBOX_LIFETIME_MIN_S = 1;
export const SANDBOX_LIFETIME_MAX_S = 86_400;
export const SANDBOX_LIFETIME_DEFAULT_S = 300;

/** exec's per-stream capture cap when ExecOpts.maxOutputBytes is not given. */
export const DEFAULT_EXEC_OUTPUT_CAP_BYTES = 1024 * 1024;

/**
 * Every network mode of a local sandbox, the default first: `isolated` is a network namespace of
 * its own holding only its own loopback, so neither the host's loopback services nor its abstract
 * Unix sockets are reachable; `host` shares the host's network namespace.
 */
export const NETWORK_MODES = ['isolated', 'host'] as const;
/** One of NETWORK_MODES. */
export type NetworkMode = (typeof NETWORK_MODES)[number];

/** True exactly when `value` is one of NETWORK_MODES. */
export function isNetworkMode(value: string): value is NetworkMode {
  return (NETWORK_MODES as readonly string[]).includes(value);
}

/** exec's error when its signal was aborted before the command started: nothing ran. */
export function cancelledBeforeStart(): ProviderError {
  return new ProviderError('conflict', { code: 'cancelled', detail: 'The call was cancelled before the command started.' });
}

/** The error of a provider (or a provider call) that cannot open an interactive terminal. */
export function noTerminal(): ProviderError {
  return new ProviderError('unsupported', { code: 'no_terminal', detail: 'This provider cannot open an interactive terminal.' });
}

/** The unsupported error of a provider without stopProcesses. */
export function noStopProcesses(): ProviderError {
  return new ProviderError('unsupported', {
    code: 'no_stop_processes',
    detail:
      "This provider cannot stop a sandbox's processes for you (it has no process limit to recover from): end them with run_command (kill or pkill), or cancel_task for a task.",
  });
}

/** Exactly the nine metadata fields the tools may disclose. Times are ISO 8601 or null. */
export interface SandboxMetadata {
  sandbox_id: string;
  template: string | null;
  status: string | null;
  region: string | null;
  started_at: string | null;
  end_at: string | null;
  cpu_count: number | null;
  memory_mb: number | null;
  disk_size_mb: number | null;
}

/** A principal's name as a tokens file, a sandbox's record and a template's may hold it (also safe as an E2B metadata value). */
export const PRINCIPAL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Options for create; omitted options keep the provider's defaults. */
export interface CreateOpts {
  template?: string;
  timeoutS?: number;
  envs?: Record<string, string>;
  region?: string;
  cpu?: number;
  memoryMb?: number;
  /**
   * The principal that creates it (a PRINCIPAL_NAME_PATTERN name), recorded with the sandbox for
   * as long as it lives — never part of its metadata. Omitted: no owner is recorded.
   */
  owner?: string;
  /**
   * The user whose templates `template` may name (their own, then the shared ones); omitted: the
   * operator or an admin, who may name every template (docs/principals.md).
   */
  templateUser?: string;
  /**
   * The sandbox's egress (entries already checked against the server's permitted set); absent
   * keeps the provider's default. A provider that cannot enforce it exactly throws unsupported.
   */
  network?: NetworkPolicy;
  /**
   * A host directory (a real path, already checked against the server's permitted ones) the
   * sandbox gets as its workspace: a copy-on-write view (local) or a copy (e2b). A provider
   * without workspaces throws unsupported.
   */
  workspace?: string;
}

/**
 * A sandbox's workspace, as its provider recorded it at create (for the person's `diff` and
 * `apply`, and workspace_changes; never part of its metadata). Only the server side records it:
 * nothing a sandbox does can change where `apply` writes.
 */
export interface SandboxWorkspace {
  /** The host directory (a real path) it was made from. */
  hostPath: string;
  /** Where the sandbox sees it: also the default cwd of its commands and tasks. */
  path: string;
  /**
   * The trees the agent compares (absolute, or `~/…` in the sandbox user's home): the workspace
   * as it started, as the sandbox sees it now, and the overlay's upper directory when there is one.
   */
  trees: { base: string; current: string; upper?: string };
  /**
   * True when `trees.base` is the workspace as it was at create (a copy: e2b), so a change's kind
   * says whether the path existed then; false when it is the live host directory (an overlay's lower).
   */
  isBaseFrozen: boolean;
  /** The origin recorded at create: see providers/workspace-origin.ts. */
  origin: WorkspaceOrigin;
  /** A host file holding the names each directory held at create (workspace-origin.ts WorkspaceNames), where they were recorded. */
  namesFile?: string;
  /**
   * Where the host reads the sandbox's trees itself (host paths; local): the overlay's upper and
   * merged view, so the changes are computed on the host and the agent is never asked; null when
   * the provider reads them itself but cannot now (the sandbox is not running). Absent (e2b): the
   * agent nominates the changed paths and the host downloads and checks each.
   */
  hostTrees?: { upper: string; current: string } | null;
}

/** What the host directory was at create, as far as `apply` needs it. */
export interface WorkspaceOrigin {
  /**
   * Nanoseconds since the epoch, as a decimal string: a host file whose ctime is not before this
   * changed since create (the kernel stamps every write, chmod and rename of a file with a ctime).
   */
  sinceNs: string;
  /** The git repository the directory lies in, as it was at create; absent when it is in none. */
  git?: WorkspaceGit;
}

/** The repository a workspace lies in. */
export interface WorkspaceGit {
  /** Its top-level directory (a real path). */
  top: string;
  /** The workspace's path inside it, `` at the top or ending in `/`. */
  prefix: string;
  /** The commit HEAD named at create; null in a repository without commits. */
  head: string | null;
}

/** Ports a sandbox may expose: any TCP port. */
export const EXPOSED_PORT_MIN = 1;
export const EXPOSED_PORT_MAX = 65535;

/** Ports of a provider's own plumbing inside its sandboxes, with what uses each (a sentence's subject). */
export type ReservedPorts = Readonly<Record<number, string>>;

/**
 * Throws invalid_argument (naming `port`) unless `port` is a TCP port a sandbox may expose: in
 * range, and not one of `reserved` — exposing the sandbox's own plumbing (its egress proxy, say)
 * would hand it to whoever reaches the URL.
 */
export function assertExposablePort(port: unknown, reserved: ReservedPorts = {}): asserts port is number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < EXPOSED_PORT_MIN || port > EXPOSED_PORT_MAX) {
    throw new ProviderError('invalid_argument', { detail: `port must be an integer from ${EXPOSED_PORT_MIN} to ${EXPOSED_PORT_MAX}.` });
  }
  const user = reserved[port];
  if (user !== undefined) {
    throw new ProviderError('invalid_argument', {
      code: 'port_reserved',
      detail: `port: ${port} is ${user}, not a server of the sandbox's, and cannot be exposed; serve on another port.`,
    });
  }
}

/** Where the person (not the sandbox) reaches a port the sandbox serves. */
export interface ExposedPort {
  url: string;
}

/**
 * A sandbox's effective network, for people (the debug CLI): never part of a tool result, whose
 * metadata keeps its nine fixed fields. `egress`: `none` (own loopback only), `allow_out` (the
 * listed destinations), `host` (the host's network, local) or `provider_default` (e2b: E2B's own).
 */
export interface NetworkDescription {
  egress: 'none' | 'allow_out' | 'host' | 'provider_default';
  allow_out: string[];
  /** The proxy commands use, as seen inside the sandbox; null without one. */
  proxy: string | null;
  /** Ports exposed so far, where the provider keeps them (local); e2b has a URL for every port. */
  exposed_ports: { port: number; url: string }[];
}

export interface ListOpts {
  status?: string;
  region?: string;
  /** Only sandboxes whose recorded owner is this; applied before offset and limit. */
  owner?: string;
  limit: number;
  offset: number;
}

/**
 * Whose processes an exec starts. `command`: the caller's own work (run_command, run_code);
 * `task`: a task's agent start, its supervisor and command (start_task); `service`: the server's
 * own short helpers (the agent's other ops, its install, clean-ups). A provider may bound them
 * differently: the local provider keeps processes in reserve for `command` and `service` when
 * tasks reach the sandbox's process limit, and makes `command` processes the OOM killer's first choice.
 */
export type ExecRole = 'command' | 'task' | 'service';

/** A shell command run synchronously inside a sandbox (by bash -c, or sh where bash is missing). */
export interface ExecOpts {
  /** Working directory, by resolveSandboxPath (default: the home). */
  cwd?: string;
  envs?: Record<string, string>;
  stdin?: Buffer;
  /** Kills the command's whole process group when it elapses. */
  timeoutS: number;
  /**
   * Per-stream capture cap (default DEFAULT_EXEC_OUTPUT_CAP_BYTES). Beyond it the stream is still
   * drained; the result keeps bytes from its start and from its end, says where they meet
   * (*HeadBytes) and sets *Truncated.
   */
  maxOutputBytes?: number;
  /**
   * Aborted when the caller gave up (e.g. the MCP client cancelled the call): the provider kills
   * the command's process group as at a timeout and returns promptly.
   */
  signal?: AbortSignal;
  /** Default `command`. */
  role?: ExecRole;
  /** See AgentChannelOpts.isStartSkipped: true runs the command another way rather than start a resident for it. */
  isResidentStartSkipped?: boolean;
  /** A file that must be gone once the command has ended, however it ended (run_code's program): see FileRemoval. */
  removeFile?: FileRemoval;
}

/**
 * run_code's program file, to be removed once its command has ended (its exit, a timeout, a cancel,
 * the end of the task it became). Where the sandbox's agent takes the protocol's `remove_file`
 * (minor 10: agentRemovesFile) the provider runs the command as given and hands the agent `path`,
 * which it unlinks then; anywhere else (an older agent, no agent, envd's own commands) it runs
 * `selfRemovingCommand` instead, which removes the file itself (a shell trap).
 */
export interface FileRemoval {
  /** RUN_CODE_FILE_PATTERN's form. */
  path: string;
  selfRemovingCommand: string;
}

/**
 * The command to run and the `remove_file` to send for `opts.removeFile`, by whether the agent
 * that runs it takes the field (`isCarried`).
 */
export function withFileRemoval(command: string, opts: ExecOpts, isCarried: boolean): { command: string; removeFile?: string } {
  const removal = opts.removeFile;
  if (!removal) return { command };
  return isCarried ? { command, removeFile: removal.path } : { command: removal.selfRemovingCommand };
}

export interface ExecResult {
  /** Shell convention: 128+signal when killed by a signal; null if the outcome is unknown. */
  exitCode: number | null;
  stdout: Buffer;
  stderr: Buffer;
  /** True when bytes were dropped from the middle of stdout. */
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  /**
   * How many leading bytes of `stdout` are the stream's first bytes; the rest are its last bytes.
   * All of them when nothing was dropped; when truncated, the dropped middle sat at this offset.
   */
  stdoutHeadBytes: number;
  stderrHeadBytes: number;
  timedOut: boolean;
  /**
   * Sentences of the provider's own about a resource limit the command met (its memory limit
   * killed a process, a writable mount is full, the process limit is reached); absent when none.
   * What the egress proxy refused meanwhile is egressNotes' to say.
   */
  notes?: string[];
  /** Why part of the output was lost (where it was recorded filled up): the truncation is that, not the cap. */
  outputLost?: string;
}

/** One measured amount and the limit it counts against (null: no limit holds, or none is known). */
export interface UsageAmount {
  used: number;
  limit: number | null;
}

/**
 * What a sandbox uses now, for people (the dashboard): null for what the provider cannot measure,
 * never 0. `memoryBytes` includes files in memory-backed mounts where the sandbox is charged for
 * them (a local sandbox's tmpfs mounts).
 */
export interface SandboxUsage {
  memoryBytes: UsageAmount | null;
  processes: UsageAmount | null;
  diskBytes: UsageAmount | null;
}

/** The usage of a sandbox whose provider measures nothing. */
export function unmeasuredUsage(): SandboxUsage {
  return { memoryBytes: null, processes: null, diskBytes: null };
}

/** The time span egressNotes looks at: epoch milliseconds, `untilMs` exclusive. */
export interface EgressWindow {
  sinceMs: number;
  untilMs?: number;
}

export interface ReadFileOpts {
  offset?: number;
  length?: number;
}

export interface ReadFileResult {
  data: Buffer;
  /** The whole file's size in bytes. */
  size: number;
}

export interface WriteFileOpts {
  append?: boolean;
  /**
   * Written by the server for itself (the agent's install, into the sandbox's own home): as the
   * sandbox's own user even where the file tools act as an image's user (local: docs/templates.md).
   */
  isServerWrite?: boolean;
}

export interface FileEntry {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modified_at: string | null;
}

export interface ListFilesOpts {
  depth: number;
  /** Stop after this many entries (the caller sets truncated when reached). */
  maxEntries: number;
}

/** An interactive terminal session's start: its window size and, optionally, a program instead of the shell. */
export interface TerminalOpts {
  cols: number;
  rows: number;
  /** A program and its arguments, run directly (no shell) instead of an interactive shell. */
  command?: readonly string[];
  /** TERM inside the sandbox (default xterm-256color). */
  term?: string;
  /** Receives everything the terminal prints, byte for byte, in order. */
  onData(data: Buffer): void;
}

/**
 * A running terminal: a fresh pseudo-terminal whose slave end is the controlling terminal of a
 * program in the sandbox, as the sandbox user with run_command's environment. Never the caller's
 * own terminal: a sandboxed process holding that could inject keystrokes into it (TIOCSTI).
 */
export interface TerminalSession {
  /** Sends keystrokes (bytes) to the program, in call order. */
  write(data: Buffer): void;
  resize(cols: number, rows: number): void;
  /** Ends the program (SIGKILL to what runs on the terminal). */
  kill(): void;
  /** Resolves with the program's exit status once it ended (128+signal when killed); never rejects. */
  readonly exited: Promise<number>;
}

/** How one request through an AgentChannel is bounded, and the environment of the command it may start. */
export interface AgentChannelRequestOpts {
  /** After this long without an answer the request fails (timeout, code agent_timeout). */
  timeoutMs: number;
  /** Aborting asks the agent to abort the request (an exec's command is killed); its answer is still awaited. */
  signal?: AbortSignal;
  /** The call's own variables for a start's or exec's command (the provider adds the sandbox's). */
  callEnvs?: Record<string, string>;
}

/** How agentChannel may get a channel. */
export interface AgentChannelOpts {
  /**
   * True: only a resident already running and reachable answers; none is started for this (an
   * e2b resident is a long-lived command, more than a one-off question such as a session close's
   * task check should leave behind). A local sandbox's resident is its keeper's: always running.
   */
  isStartSkipped?: boolean;
}

/**
 * A sandbox's resident agent (protocol minor 5): agent requests without a process start. Its
 * request() throws only ProviderError: `unavailable` with code `resident_unreachable` when the
 * request was never sent (nothing happened: run it another way), `unavailable`/`agent_lost` when
 * it was sent and no answer came (its outcome is unknown), `timeout`/`agent_timeout`. Answers are
 * schema-checked envelopes; their results are the caller's to validate.
 */
export interface AgentChannel {
  /** The resident's greeting: its versions and the ops it serves. */
  readonly hello: ResidentHello;
  supports(op: OpName): boolean;
  request(request: AgentRequestInput, opts: AgentChannelRequestOpts): Promise<AgentResponse>;
}

/** What an exec that may be promoted ended as: its result, or the task it became. */
export type PromotableOutcome = { kind: 'finished'; result: ExecResult } | { kind: 'promoted'; task: TaskView };

/** An exec that goes on as task `taskId` if still running after `afterS` seconds (see Provider.execPromotable). */
export interface PromotableExecOpts extends ExecOpts {
  promote: { taskId: string; afterS: number };
}

/** What a snapshot made: a template create_sandbox can start from. */
export interface SnapshotResult {
  /** What create_sandbox's `template` takes to start a sandbox from it (the name, or the provider's id). */
  template: string;
  /** Bytes of files saved, where the provider counts them; null otherwise. */
  sizeBytes: number | null;
  /** When it was made (ISO 8601). */
  createdAt: string;
  /** What a sandbox started from it has and has not (processes, tasks), in the provider's words. */
  note: string;
}

/** How a snapshot is taken. */
export interface SnapshotOpts {
  /**
   * Keep apt's downloaded package lists and .deb archives (var/lib/apt/lists/*,
   * var/cache/apt/archives/*.deb), which a local snapshot otherwise leaves out. E2B's snapshots keep
   * every file either way.
   */
  keepAptCache?: boolean;
  /**
   * The user whose own template it becomes, which only that user (and the operator and admins) may
   * see and use; omitted: shared (the operator's and admins' snapshots).
   */
  owner?: string;
}

/** The error of a provider that cannot snapshot sandboxes. */
export function noSnapshots(): ProviderError {
  return new ProviderError('unsupported', { code: 'no_snapshots', detail: 'This provider cannot snapshot sandboxes.' });
}

/** A sandbox provider: lifecycle, exec and files. Never extends a lifetime unless setTimeout is called. */
export interface Provider {
  /** The prefix of qualified ids, e.g. `local`. */
  readonly id: string;
  /**
   * Shell words that start Node.js for the in-sandbox agent (default: `node` from the sandbox's
   * PATH). The local provider's is its agent runtime, the same in every sandbox.
   */
  readonly agentNode?: string;
  create(opts: CreateOpts): Promise<SandboxMetadata>;
  list(opts: ListOpts): Promise<SandboxMetadata[]>;
  getInfo(sandboxId: string): Promise<SandboxMetadata>;
  /**
   * When the lifetime ends, as getInfo's end_at, for a renewal's look before its setTimeout (which
   * checks the sandbox itself): a provider may answer without getInfo's liveness checks. Throws
   * not_found when the sandbox is known gone. Optional: getInfo's end_at otherwise.
   */
  lifetimeEnd?(sandboxId: string): Promise<string | null>;
  /** Sets the lifetime to `timeoutS` from now. */
  setTimeout(sandboxId: string, timeoutS: number): Promise<void>;
  /** Destroys the sandbox; throws not_found when it does not exist. */
  kill(sandboxId: string): Promise<void>;
  /** The owner recorded at create (CreateOpts.owner), or null; throws not_found when the sandbox does not exist. */
  getOwner(sandboxId: string): Promise<string | null>;
  /**
   * The workspace recorded at create (CreateOpts.workspace), or null for a sandbox without one;
   * throws not_found when the sandbox does not exist. Optional: a provider without workspaces omits it.
   */
  getWorkspace?(sandboxId: string): Promise<SandboxWorkspace | null>;
  /**
   * The working directory the sandbox's image names for commands without a cwd (an image
   * template's WorkingDir; else, where the image's user runs them, its home or `/`), or null.
   * Optional: a provider without image templates omits it.
   */
  imageWorkingDir?(sandboxId: string): Promise<string | null>;
  /**
   * The environment every command in the sandbox starts with, as far as the provider can read it
   * from the sandbox's own record (so a server that did not create it can mask its secrets).
   */
  getEnvironment(sandboxId: string): Promise<Record<string, string>>;
  exec(sandboxId: string, command: string, opts: ExecOpts): Promise<ExecResult>;
  /** Paths of the file methods resolve by resolveSandboxPath. */
  readFile(sandboxId: string, path: string, opts?: ReadFileOpts): Promise<ReadFileResult>;
  /** Creates parent directories; returns the file's size after the write. */
  writeFile(sandboxId: string, path: string, data: Buffer, opts?: WriteFileOpts): Promise<{ size: number }>;
  listFiles(sandboxId: string, path: string, opts: ListFilesOpts): Promise<FileEntry[]>;
  /** A URL for the sandbox's `port`, the same on every call, valid until the sandbox ends. */
  exposePort(sandboxId: string, port: number): Promise<ExposedPort>;
  /** The sandbox's effective network (for people; see NetworkDescription). */
  describeNetwork(sandboxId: string): Promise<NetworkDescription>;
  /**
   * Static sentences about the sandbox's resource limits that were reached (memory limit kills so
   * far, a full writable mount, the process limit now); [] when none or unknown. Optional: a
   * provider that cannot tell omits it.
   */
  limitNotes?(sandboxId: string): Promise<string[]>;
  /**
   * Sentences naming the destinations the sandbox's egress proxy refused, or allowed but could
   * not reach, from `sinceMs` up to (not including) `untilMs` (epoch ms; open-ended without it),
   * and why; [] when none or unknown. The host names are the sandbox's choice: callers mask them
   * like its output. Optional: a provider without an egress proxy omits it.
   */
  egressNotes?(sandboxId: string, window: EgressWindow): Promise<string[]>;
  /**
   * What the sandbox uses now (memory, processes, disk; see SandboxUsage). Never extends the
   * lifetime. Optional: a provider that measures nothing omits it.
   */
  usage?(sandboxId: string): Promise<SandboxUsage>;
  /**
   * Ends every process of the sandbox that is not part of a task (what commands left running,
   * commands still running) and returns how many it ended; tasks and the sandbox go on. Needs no
   * new process in the sandbox: the way out of a full process table. Optional: without it the
   * tool is unsupported.
   */
  stopProcesses?(sandboxId: string): Promise<{ stopped: number }>;
  /**
   * Opens an interactive terminal in the sandbox (the operator's `shell` command; no tool uses
   * it). Optional: a provider without it cannot offer one. Never extends the lifetime.
   */
  openTerminal?(sandboxId: string, opts: TerminalOpts): Promise<TerminalSession>;
  /**
   * The sandbox's resident agent, or null when it has none that answers now (a sandbox from
   * before residents, or one restarting): agent calls then run as processes of their own, through
   * exec. Optional. Never extends the lifetime.
   */
  agentChannel?(sandboxId: string, opts?: AgentChannelOpts): Promise<AgentChannel | null>;
  /**
   * exec by ExecOpts' contract, except that a command still running after `promote.afterS` goes
   * on as task `promote.taskId` (the agent's task, as start_task makes) and the answer is its
   * view; null when this sandbox cannot (no resident that can): the caller runs the command as a
   * task from the start instead. Optional.
   */
  execPromotable?(sandboxId: string, command: string, opts: PromotableExecOpts): Promise<PromotableOutcome | null>;
  /**
   * Saves the sandbox's current files as a new template named `name`, which create can start
   * from; the sandbox keeps running. Optional: a provider without snapshots omits it (callers
   * answer noSnapshots()). Never extends the lifetime. `opts.owner`: the user whose own template it
   * becomes (SnapshotOpts).
   */
  snapshot?(sandboxId: string, name: string, opts?: SnapshotOpts): Promise<SnapshotResult>;
  /**
   * The templates create accepts (besides its default), read now: for create_sandbox's
   * description. `user`: only those that user may use (CreateOpts.templateUser); omitted: every
   * one. Optional: a provider that cannot list them omits it.
   */
  templateNames?(user?: string): string[];
  /** Releases clients and timers held by this instance (not the sandboxes). */
  close(): Promise<void>;
}
