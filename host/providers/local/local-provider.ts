// The local provider: bubblewrap sandboxes on this machine, each kept by a detached keeper
// process that owns its deadline (keeper.ts). This file validates, finds and verifies sandboxes
// through their state directories and /proc, and runs commands and file scripts inside them
// with setpriv + nsenter. Every failure leaves here as a ProviderError.
import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants, existsSync, lstatSync, mkdirSync, openSync, realpathSync, statSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { basename, delimiter, dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { ProviderError } from '../../errors.js';
import type {
  CreateOpts,
  ExecOpts,
  ExecResult,
  FileEntry,
  ListFilesOpts,
  ListOpts,
  Provider,
  ReadFileOpts,
  ReadFileResult,
  SandboxMetadata,
  WriteFileOpts,
} from '../provider.js';
import {
  buildEnterCommand,
  CHDIR_SCRIPT,
  envPrelude,
  exportScript,
  HIDDEN_PATHS,
  NETWORK_MODES,
  SANDBOX_HOME,
  sandboxPath,
  SCRATCH_PATHS,
  type Command,
  type Identity,
  type NetworkMode,
  type ToolPaths,
} from './bwrap-args.js';
import { removeCgroups } from './cgroups.js';
import { keeperFailureError, LOCAL_DETAILS, toProviderError } from './errors.js';
import { CancelledError, captureCommand, coverInherited, killProcessGroup, SpawnFailedError, type CaptureResult, type FdCover } from './exec.js';
import { fileStatusError, LIST_SCRIPT, parseListing, READ_SCRIPT, resolveSandboxPath, WRITE_SCRIPT } from './files.js';
import type { KeeperReport } from './keeper.js';
import { inheritableFds, isAlive, signalIfAlive } from './proc.js';
import {
  assertPrivateState,
  defaultStateDir,
  dirAgeMs,
  ensureSandboxesDir,
  isSandboxId,
  listSandboxIds,
  newSandboxId,
  newSandboxUid,
  readDeadline,
  readKeeperRecord,
  readSpec,
  removeSandboxDir,
  sandboxesDir,
  SPEC_FILE,
  specNetwork,
  sweepTombstones,
  writeDeadline,
  writePrivateFile,
  type KeeperRecord,
  type SandboxSpec,
} from './state.js';

/** Options of the local provider; every one has a working default. */
export interface LocalProviderOpts {
  /** State directory (default: $SANDBOX_MCP_STATE_DIR, $XDG_STATE_HOME/sandbox-mcp, ~/.local/state/sandbox-mcp). */
  stateDir?: string;
  /** The built keeper entry (`node <keeperScript> <dir>`); default dist/keeper.js next to the host bundle. */
  keeperScript?: string;
  /** Node binary for keepers (default: this process's). */
  nodePath?: string;
  /** Lifetime of a sandbox when create gives none (default 300 s, like E2B). */
  defaultTimeoutS?: number;
  /**
   * One fixed uid/gid for every sandbox when the host runs as root. By default each sandbox gets
   * a uid (and equal gid) of its own from an unassigned range (see SANDBOX_UID_BASE).
   */
  sandboxUid?: number;
  sandboxGid?: number;
  /** How long create waits for the keeper to report a ready sandbox (default 20 s). */
  startTimeoutMs?: number;
  /** How long kill waits for the keeper to finish before cleaning up itself (default 5 s). */
  killWaitMs?: number;
  /** Upper bound for one file operation (default 120 s). */
  fileOpTimeoutMs?: number;
  /** After a command exits, how long its output pipes may stay open (background children) (default 100 ms). */
  drainGraceMs?: number;
  /** Absolute paths of the system tools, instead of searching PATH (tests point these at fakes). */
  tools?: Partial<ToolPaths>;
  /**
   * Network of the sandboxes this instance creates (default `isolated`: only their own loopback).
   * `host` shares the host's network namespace: its interfaces, its loopback services and its
   * abstract Unix sockets. Recorded per sandbox, so every instance enters each one correctly.
   */
  network?: NetworkMode;
}

export type { NetworkMode } from './bwrap-args.js';
export { NETWORK_MODES } from './bwrap-args.js';

/** Name of this provider (prefix of qualified ids). */
export const LOCAL_PROVIDER_ID = 'local';

/** Default lifetime, in seconds, of a sandbox created without a timeout. */
export const DEFAULT_TIMEOUT_S = 300;
/** Accepted lifetime bounds, in seconds. */
export const MIN_TIMEOUT_S = 1;
export const MAX_TIMEOUT_S = 86_400;
/** Smallest memory limit, in MB, that leaves room for the sandbox's own pid 1 and a shell. */
export const MIN_MEMORY_MB = 32;

const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
const READ_CAP_BYTES = 1024 * 1024 * 1024;
const LIST_OUTPUT_CAP_BYTES = 64 * 1024 * 1024;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
// A keeper this late past its deadline is presumed stuck: the provider enforces the deadline itself.
const OVERDUE_MS = 5_000;

interface LiveSandbox {
  id: string;
  dir: string;
  spec: SandboxSpec;
  keeper: KeeperRecord;
  endAtMs: number;
}

/** Path of dist/keeper.js: beside this file when bundled into dist/, else the repository's build output. */
export function defaultKeeperScript(): string {
  const self = fileURLToPath(import.meta.url);
  if (basename(dirname(self)) === 'dist') return join(dirname(self), 'keeper.js');
  // The CLI is code-split: this module may sit in dist/chunks/.
  if (basename(dirname(self)) === 'chunks') return join(dirname(self), '..', 'keeper.js');
  return resolve(dirname(self), '..', '..', '..', 'dist', 'keeper.js');
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function findExecutable(name: string): string | null {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  for (const dir of dirs) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return null;
}

function isUnder(path: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => path === p || path.startsWith(p + '/'));
}

/** True when every directory on the way to `path` can be searched by "others" (the dropped uid). */
function traversableByOthers(path: string): boolean {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    try {
      if ((statSync(dir).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (dir === '/') return true;
  }
}

function invalid(detail: string): ProviderError {
  return new ProviderError('invalid_argument', { detail });
}

function validateEnvs(envs: Record<string, string> | undefined, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(envs ?? {})) {
    if (!ENV_NAME.test(name)) throw invalid(`${what}: an environment variable name is not a valid identifier.`);
    if (typeof value !== 'string' || value.includes('\0')) throw invalid(`${what}: an environment variable value is not a string without NUL bytes.`);
    out[name] = value;
  }
  return out;
}

function isNonNegativeInt(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}

/** The local provider (see the module comment). Use createLocalProvider. */
export class LocalProvider implements Provider {
  readonly id = LOCAL_PROVIDER_ID;
  private readonly stateDir: string;
  private readonly sandboxes: string;
  private readonly keeperScript: string;
  private readonly nodePath: string;
  private readonly defaultTimeoutS: number;
  /** The fixed identity of every sandbox, or (root without sandboxUid) the template of per-sandbox ones. */
  private readonly identity: Identity;
  private readonly uidPerSandbox: boolean;
  /** Uids handed to creates still in progress (not yet visible in the state directory). */
  private readonly pendingUids = new Set<number>();
  private readonly startTimeoutMs: number;
  private readonly killWaitMs: number;
  private readonly fileOpTimeoutMs: number;
  private readonly drainGraceMs: number;
  private readonly network: NetworkMode;
  private readonly shell: string;
  private readonly nodeBinDirs: string[];
  private tools: ToolPaths | null = null;
  private readonly toolOverrides: Partial<ToolPaths>;
  private readonly cache = new Map<string, { spec: SandboxSpec; keeper: KeeperRecord }>();
  private stateTrusted = false;
  /** Descriptors our parent left open for children, covered in every keeper and command we start. */
  private readonly cover: FdCover | undefined;
  /** Process groups of this instance's running commands, per sandbox (ended by kill). */
  private readonly running = new Map<string, Set<number>>();

  constructor(opts: LocalProviderOpts = {}) {
    this.stateDir = resolve(opts.stateDir ?? defaultStateDir());
    this.sandboxes = sandboxesDir(this.stateDir);
    this.keeperScript = opts.keeperScript ?? defaultKeeperScript();
    this.nodePath = opts.nodePath ?? process.execPath;
    this.defaultTimeoutS = opts.defaultTimeoutS ?? DEFAULT_TIMEOUT_S;
    const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
    this.identity = isRoot
      ? { uid: opts.sandboxUid ?? 65534, gid: opts.sandboxGid ?? 65534, dropPrivileges: true }
      : { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, dropPrivileges: false };
    this.uidPerSandbox = isRoot && opts.sandboxUid === undefined;
    this.startTimeoutMs = opts.startTimeoutMs ?? 20_000;
    this.killWaitMs = opts.killWaitMs ?? 5_000;
    this.fileOpTimeoutMs = opts.fileOpTimeoutMs ?? 120_000;
    this.drainGraceMs = opts.drainGraceMs ?? 100;
    this.toolOverrides = opts.tools ?? {};
    const network = opts.network ?? 'isolated';
    if (!NETWORK_MODES.includes(network)) throw invalid("The local provider's network must be 'isolated' or 'host'.");
    this.network = network;
    this.shell = existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';
    const dirs = new Set<string>([dirname(this.nodePath)]);
    try {
      dirs.add(dirname(realpathSync(this.nodePath)));
    } catch {
      // The path itself is enough.
    }
    this.nodeBinDirs = [...dirs];
    const fds = inheritableFds();
    // Kept open for the life of the process: a closed number could be reused by another file.
    this.cover = fds.length > 0 ? { fds, devNullFd: openSync('/dev/null', 'r+') } : undefined;
  }

  // ---- lifecycle -------------------------------------------------------------------------

  async create(opts: CreateOpts): Promise<SandboxMetadata> {
    try {
      return await this.createUnsafe(opts);
    } catch (e) {
      throw toProviderError(e);
    }
  }

  private async createUnsafe(opts: CreateOpts): Promise<SandboxMetadata> {
    if (opts.template !== undefined && opts.template !== 'base') {
      throw new ProviderError('not_found', { code: 'template_not_found', detail: LOCAL_DETAILS.templateOnlyBase });
    }
    if (opts.region !== undefined && opts.region !== 'local') throw invalid(LOCAL_DETAILS.regionOnlyLocal);
    const timeoutS = opts.timeoutS ?? this.defaultTimeoutS;
    if (typeof timeoutS !== 'number' || !(timeoutS >= MIN_TIMEOUT_S && timeoutS <= MAX_TIMEOUT_S)) {
      throw invalid(`timeout must be between ${MIN_TIMEOUT_S} and ${MAX_TIMEOUT_S} seconds.`);
    }
    if (opts.cpu !== undefined) {
      if (!Number.isSafeInteger(opts.cpu) || opts.cpu < 1) throw invalid('cpu must be an integer of at least 1.');
      if (opts.cpu > availableParallelism()) {
        throw new ProviderError('insufficient_resources', { detail: 'cpu asks for more CPUs than this machine has.' });
      }
    }
    if (opts.memoryMb !== undefined) {
      if (!Number.isSafeInteger(opts.memoryMb) || opts.memoryMb < MIN_MEMORY_MB) {
        throw invalid(`memory must be an integer of at least ${MIN_MEMORY_MB} MB.`);
      }
      if (opts.memoryMb * 1024 * 1024 > totalmem()) {
        throw new ProviderError('insufficient_resources', { detail: 'memory asks for more than this machine has.' });
      }
    }
    const envs = validateEnvs(opts.envs, 'envs');
    const tools = this.preflight();

    const sandboxes = ensureSandboxesDir(this.stateDir);
    const identity = this.newIdentity(sandboxes);
    try {
      return await this.createWith(sandboxes, identity, timeoutS, envs, tools, opts);
    } finally {
      this.pendingUids.delete(identity.uid);
    }
  }

  /** As root, a uid no live sandbox of this state directory (or a create in progress) uses. */
  private newIdentity(sandboxes: string): Identity {
    if (!this.uidPerSandbox) return this.identity;
    const taken = new Set(this.pendingUids);
    for (const id of listSandboxIds(sandboxes)) {
      const uid = readSpec(join(sandboxes, id))?.identity.uid;
      if (uid !== undefined) taken.add(uid);
    }
    const uid = newSandboxUid(taken);
    this.pendingUids.add(uid);
    return { uid, gid: uid, dropPrivileges: true };
  }

  private async createWith(
    sandboxes: string,
    identity: Identity,
    timeoutS: number,
    envs: Record<string, string>,
    tools: ToolPaths,
    opts: CreateOpts,
  ): Promise<SandboxMetadata> {
    const id = newSandboxId();
    const dir = join(sandboxes, id);
    mkdirSync(dir, { mode: 0o700 });
    const createdAtMs = Date.now();
    const spec: SandboxSpec = {
      version: 1,
      id,
      createdAtMs,
      envs,
      cpu: opts.cpu ?? null,
      memoryMb: opts.memoryMb ?? null,
      identity,
      tools,
      shell: this.shell,
      hidePaths: this.hidePaths(),
      roBindPaths: this.roBindPaths(),
      hideVarRun: isRealDir('/var/run'),
      network: this.network,
    };
    writePrivateFile(join(dir, SPEC_FILE), JSON.stringify(spec) + '\n');
    writeDeadline(dir, createdAtMs + timeoutS * 1000);

    let report: KeeperReport | null;
    try {
      report = await this.startKeeper(dir);
    } catch (e) {
      await this.forceCleanup(id, readKeeperRecord(dir));
      throw e;
    }
    if (!report.ok) {
      removeSandboxDir(sandboxes, id);
      throw keeperFailureError(report.code);
    }
    const keeper = readKeeperRecord(dir);
    if (!keeper) throw new ProviderError('internal');
    this.cache.set(id, { spec, keeper });
    return this.metadata(spec, readDeadline(dir) ?? createdAtMs + timeoutS * 1000);
  }

  /** Spawns the detached keeper and waits for its one-line report on fd 3. */
  private startKeeper(dir: string): Promise<KeeperReport> {
    return new Promise((resolvePromise, reject) => {
      const env: Record<string, string> = { PATH: process.env.PATH ?? sandboxPath() };
      if (process.env.SANDBOX_MCP_DEBUG) env.SANDBOX_MCP_DEBUG = process.env.SANDBOX_MCP_DEBUG;
      // A small heap keeps each idle keeper light; it holds no data.
      const child = spawn(this.nodePath, ['--max-old-space-size=32', '--max-semi-space-size=1', '--v8-pool-size=0', this.keeperScript, dir], {
        cwd: '/',
        env,
        detached: true,
        stdio: coverInherited(['ignore', 'ignore', process.env.SANDBOX_MCP_DEBUG ? 2 : 'ignore', 'pipe'], this.cover),
      });
      const pipe = child.stdio[3] as Readable;
      let text = '';
      let done = false;
      const finish = (r: KeeperReport | Error): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        pipe.destroy();
        child.unref();
        if (r instanceof Error) {
          try {
            child.kill('SIGKILL');
          } catch {
            // Already gone.
          }
          reject(r);
        } else resolvePromise(r);
      };
      const timer = setTimeout(
        () => finish(new ProviderError('timeout', { code: 'start_timeout', detail: LOCAL_DETAILS.startTimeout })),
        this.startTimeoutMs + 5_000,
      );
      child.on('error', () => finish(new ProviderError('unavailable', { detail: LOCAL_DETAILS.hostBundleMissing })));
      pipe.on('error', () => {});
      pipe.on('data', (b: Buffer) => {
        text += b.toString('utf8');
        const nl = text.indexOf('\n');
        if (nl < 0) return;
        try {
          finish(JSON.parse(text.slice(0, nl)) as KeeperReport);
        } catch {
          finish(new ProviderError('internal'));
        }
      });
      pipe.on('end', () => finish(new ProviderError('internal', { code: 'keeper_failed' })));
    });
  }

  private preflight(): ToolPaths {
    if (this.tools) return this.tools;
    if (process.platform !== 'linux') throw new ProviderError('unsupported', { detail: LOCAL_DETAILS.notLinux });
    const o = this.toolOverrides;
    // A tool given explicitly is used or reported missing, never searched for elsewhere.
    const tool = (name: keyof ToolPaths): string | null => {
      const path = o[name];
      if (path === undefined) return findExecutable(name);
      return isExecutable(path) ? path : null;
    };
    const bwrap = tool('bwrap');
    if (!bwrap) throw new ProviderError('unavailable', { code: 'bwrap_missing', detail: LOCAL_DETAILS.bwrapMissing });
    const nsenter = tool('nsenter');
    if (!nsenter) throw new ProviderError('unavailable', { code: 'nsenter_missing', detail: LOCAL_DETAILS.nsenterMissing });
    const setpriv = tool('setpriv');
    if (!setpriv && this.identity.dropPrivileges) {
      throw new ProviderError('unavailable', { code: 'setpriv_missing', detail: LOCAL_DETAILS.setprivMissing });
    }
    if (!existsSync(this.keeperScript)) {
      throw new ProviderError('unavailable', { code: 'host_bundle_missing', detail: LOCAL_DETAILS.hostBundleMissing });
    }
    this.tools = { bwrap, nsenter, setpriv: setpriv ?? 'setpriv', sh: existsSync('/bin/sh') ? '/bin/sh' : this.shell };
    return this.tools;
  }

  /** The state directory must be invisible inside sandboxes wherever it lives. */
  private hidePaths(): string[] {
    let state = this.stateDir;
    try {
      state = realpathSync(state);
    } catch {
      // Use it as given.
    }
    return isUnder(state, [...HIDDEN_PATHS, ...SCRATCH_PATHS]) ? [] : [state];
  }

  /** node's prefix, bound back when the sandbox's hidden paths (/home, /root…) would hide it. */
  private roBindPaths(): string[] {
    let node: string;
    try {
      node = realpathSync(this.nodePath);
    } catch {
      return [];
    }
    if (!isUnder(node, [...HIDDEN_PATHS, ...SCRATCH_PATHS])) return [];
    const prefix = dirname(dirname(node));
    if (this.identity.dropPrivileges && !traversableByOthers(join(prefix, 'bin'))) return [];
    return [prefix];
  }

  async list(opts: ListOpts): Promise<SandboxMetadata[]> {
    try {
      if (!isNonNegativeInt(opts.offset)) throw invalid('offset must be an integer of at least 0.');
      if (!isNonNegativeInt(opts.limit) || opts.limit < 1) throw invalid('limit must be an integer of at least 1.');
      // Every local sandbox is running; any other status (e.g. paused) matches none.
      if (opts.status !== undefined && opts.status !== 'running') return [];
      if (opts.region !== undefined && opts.region !== 'local') return [];
      this.trustState();
      sweepTombstones(this.sandboxes);
      const found: SandboxMetadata[] = [];
      const ids = listSandboxIds(this.sandboxes);
      for (const id of ids) {
        const sb = await this.inspect(id);
        if (sb) found.push(this.metadata(sb.spec, sb.endAtMs));
      }
      found.sort((a, b) => (a.started_at! < b.started_at! ? -1 : a.started_at! > b.started_at! ? 1 : a.sandbox_id < b.sandbox_id ? -1 : 1));
      return found.slice(opts.offset, opts.offset + opts.limit);
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async getInfo(sandboxId: string): Promise<SandboxMetadata> {
    try {
      const sb = await this.require(sandboxId);
      return this.metadata(sb.spec, sb.endAtMs);
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async setTimeout(sandboxId: string, timeoutS: number): Promise<void> {
    try {
      if (typeof timeoutS !== 'number' || !(timeoutS >= MIN_TIMEOUT_S && timeoutS <= MAX_TIMEOUT_S)) {
        throw invalid(`timeout must be between ${MIN_TIMEOUT_S} and ${MAX_TIMEOUT_S} seconds.`);
      }
      const sb = await this.require(sandboxId);
      try {
        writeDeadline(sb.dir, Date.now() + timeoutS * 1000);
      } catch {
        throw this.gone();
      }
      signalIfAlive(sb.keeper.keeper, 'SIGCONT');
      if (!signalIfAlive(sb.keeper.keeper, 'SIGUSR1')) {
        await this.inspect(sandboxId);
        throw this.gone();
      }
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async kill(sandboxId: string): Promise<void> {
    try {
      const sb = await this.require(sandboxId);
      const keeper = sb.keeper.keeper;
      // A stopped keeper would never act on SIGTERM.
      signalIfAlive(keeper, 'SIGCONT');
      signalIfAlive(keeper, 'SIGTERM');
      const deadline = Date.now() + this.killWaitMs;
      while (isAlive(keeper) && Date.now() < deadline) await sleep(2);
      // The keeper normally removed everything; finish the job if it died or hung midway.
      if (isAlive(keeper) || existsSync(sb.dir)) await this.forceCleanup(sandboxId, sb.keeper);
      this.cache.delete(sandboxId);
      // Commands of ours still waiting on the dead sandbox (e.g. a stopped nsenter) end now.
      for (const pgid of this.running.get(sandboxId) ?? []) killProcessGroup(pgid);
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async close(): Promise<void> {
    this.cache.clear();
  }

  // ---- exec and files --------------------------------------------------------------------

  async exec(sandboxId: string, command: string, opts: ExecOpts): Promise<ExecResult> {
    try {
      if (typeof command !== 'string' || command.includes('\0')) throw invalid('command must be a string without NUL bytes.');
      if (typeof opts.timeoutS !== 'number' || !(opts.timeoutS > 0)) throw invalid('timeout must be a positive number of seconds.');
      const maxOutputBytes = opts.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
      if (!isNonNegativeInt(maxOutputBytes)) throw invalid('maxOutputBytes must be an integer of at least 0.');
      const callEnvs = validateEnvs(opts.envs, 'envs');
      const cwd = opts.cwd !== undefined ? resolveSandboxPath(opts.cwd) : undefined;
      if (opts.signal?.aborted) throw cancelled();
      const sb = await this.require(sandboxId);
      const inner = [sb.spec.shell, '-c', envPrelude(sb.spec.shell), sb.spec.shell, command];
      const argv = cwd !== undefined ? ['/bin/sh', '-c', CHDIR_SCRIPT, 'sh', cwd, ...inner] : inner;
      const r = await this.run(sb, argv, {
        // Only this fixed environment exists outside the sandbox; the caller's is sourced inside.
        env: { PATH: sandboxPath(this.nodeBinDirs) },
        envScript: exportScript({ ...this.baseEnv(), ...sb.spec.envs, ...callEnvs }),
        timeoutMs: opts.timeoutS * 1000,
        maxOutputBytes,
        keepTail: true,
        withMetaFd: cwd !== undefined,
        ...(opts.stdin ? { stdin: opts.stdin } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
      if (r.exitCode !== 0 && !this.stillAlive(sb)) throw new ProviderError('not_found', { detail: LOCAL_DETAILS.endedDuringCommand });
      if (cwd !== undefined && r.exitCode === 1 && !r.timedOut && r.meta.toString() !== '.') {
        // invalid_argument, as E2B's envd reports it: the call's argument is wrong, not the sandbox.
        throw new ProviderError('invalid_argument', { code: 'cwd_not_found', detail: LOCAL_DETAILS.cwdMissing });
      }
      return {
        exitCode: r.exitCode,
        stdout: r.stdout,
        stderr: r.stderr,
        stdoutTruncated: r.stdoutTruncated,
        stderrTruncated: r.stderrTruncated,
        timedOut: r.timedOut,
      };
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async readFile(sandboxId: string, path: string, opts: ReadFileOpts = {}): Promise<ReadFileResult> {
    try {
      const offset = opts.offset ?? 0;
      if (!isNonNegativeInt(offset)) throw invalid('offset must be an integer of at least 0.');
      if (opts.length !== undefined && !isNonNegativeInt(opts.length)) throw invalid('length must be an integer of at least 0.');
      const abs = resolveSandboxPath(path);
      const length = opts.length === undefined ? '' : String(opts.length);
      const r = await this.runScript(sandboxId, READ_SCRIPT, [abs, String(offset), length], {
        maxOutputBytes: opts.length ?? READ_CAP_BYTES,
      });
      const size = Number(r.meta.toString().trim());
      if (!Number.isSafeInteger(size)) throw new ProviderError('internal');
      return { data: r.stdout, size };
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async writeFile(sandboxId: string, path: string, data: Buffer, opts: WriteFileOpts = {}): Promise<{ size: number }> {
    try {
      if (!Buffer.isBuffer(data)) throw invalid('data must be bytes.');
      const abs = resolveSandboxPath(path);
      const r = await this.runScript(sandboxId, WRITE_SCRIPT, [abs, opts.append ? 'a' : 'w'], { stdin: data, maxOutputBytes: 0 });
      const size = Number(r.meta.toString().trim());
      if (!Number.isSafeInteger(size)) throw new ProviderError('internal');
      return { size };
    } catch (e) {
      throw toProviderError(e);
    }
  }

  async listFiles(sandboxId: string, path: string, opts: ListFilesOpts): Promise<FileEntry[]> {
    try {
      if (!Number.isSafeInteger(opts.depth) || opts.depth < 1) throw invalid('depth must be an integer of at least 1.');
      if (!Number.isSafeInteger(opts.maxEntries) || opts.maxEntries < 1) throw invalid('maxEntries must be an integer of at least 1.');
      const abs = resolveSandboxPath(path);
      const r = await this.runScript(sandboxId, LIST_SCRIPT, [abs, String(opts.depth), String(opts.maxEntries)], {
        maxOutputBytes: LIST_OUTPUT_CAP_BYTES,
      });
      return parseListing(r.stdout).slice(0, opts.maxEntries);
    } catch (e) {
      throw toProviderError(e);
    }
  }

  // ---- internals -------------------------------------------------------------------------

  /** Runs one of the file scripts as the sandbox user and maps its status. */
  private async runScript(
    sandboxId: string,
    script: string,
    args: string[],
    opts: { stdin?: Buffer; maxOutputBytes: number },
  ): Promise<CaptureResult> {
    const sb = await this.require(sandboxId);
    const r = await this.run(sb, ['/bin/sh', '-c', script, 'sh', ...args], {
      env: { ...this.baseEnv(), LC_ALL: 'C.UTF-8' },
      timeoutMs: this.fileOpTimeoutMs,
      maxOutputBytes: opts.maxOutputBytes,
      withMetaFd: true,
      ...(opts.stdin ? { stdin: opts.stdin } : {}),
    });
    if (r.timedOut) throw new ProviderError('timeout');
    const err = fileStatusError(r.exitCode);
    if (err) {
      if (!this.stillAlive(sb)) throw this.gone();
      throw err;
    }
    return r;
  }

  private async run(
    sb: LiveSandbox,
    argv: string[],
    opts: {
      env: Record<string, string>;
      envScript?: string;
      timeoutMs: number;
      maxOutputBytes: number;
      withMetaFd: boolean;
      keepTail?: boolean;
      stdin?: Buffer;
      signal?: AbortSignal;
    },
  ): Promise<CaptureResult> {
    const cmd: Command = buildEnterCommand(
      sb.keeper.pid1.pid,
      argv,
      sb.spec.identity,
      sb.spec.tools,
      sb.keeper.cgroups.map((d) => join(d, 'cgroup.procs')),
      specNetwork(sb.spec),
    );
    let groups = this.running.get(sb.id);
    if (!groups) this.running.set(sb.id, (groups = new Set()));
    let pgid: number | undefined;
    try {
      return await captureCommand(cmd, {
        ...opts,
        drainGraceMs: this.drainGraceMs,
        onSpawn: (p) => groups.add((pgid = p)),
        onExit: () => {
          if (pgid !== undefined) groups.delete(pgid);
        },
        ...(this.cover ? { cover: this.cover } : {}),
      });
    } catch (e) {
      if (e instanceof CancelledError) throw cancelled();
      if (e instanceof SpawnFailedError) {
        if (e.code === 'ENOENT') throw new ProviderError('unavailable', { code: 'nsenter_missing', detail: LOCAL_DETAILS.nsenterMissing });
        throw new ProviderError('insufficient_resources', { code: e.code });
      }
      throw e;
    } finally {
      if (pgid !== undefined) groups.delete(pgid);
      if (groups.size === 0) this.running.delete(sb.id);
    }
  }

  private baseEnv(): Record<string, string> {
    return {
      HOME: SANDBOX_HOME,
      PATH: sandboxPath(this.nodeBinDirs),
      LANG: 'C.UTF-8',
      USER: 'user',
      LOGNAME: 'user',
      SHELL: this.shell,
    };
  }

  private metadata(spec: SandboxSpec, endAtMs: number): SandboxMetadata {
    return {
      sandbox_id: spec.id,
      template: 'base',
      status: 'running',
      region: 'local',
      started_at: new Date(spec.createdAtMs).toISOString(),
      end_at: new Date(endAtMs).toISOString(),
      cpu_count: spec.cpu,
      memory_mb: spec.memoryMb,
      disk_size_mb: null,
    };
  }

  private gone(): ProviderError {
    return new ProviderError('not_found', { detail: LOCAL_DETAILS.sandboxGone });
  }

  private async require(sandboxId: string): Promise<LiveSandbox> {
    if (typeof sandboxId !== 'string') throw this.gone();
    const sb = await this.inspect(sandboxId);
    if (!sb) throw this.gone();
    return sb;
  }

  private stillAlive(sb: LiveSandbox): boolean {
    return isAlive(sb.keeper.pid1) && isAlive(sb.keeper.keeper);
  }

  /**
   * Finds a sandbox and verifies its keeper and pid 1 against /proc (pid reuse: start times must
   * match). Dead or half-dead sandboxes are cleaned up and reported as absent (null).
   */
  private async inspect(id: string): Promise<LiveSandbox | null> {
    if (!isSandboxId(id)) return null;
    this.trustState();
    const dir = join(this.sandboxes, id);
    let cached = this.cache.get(id);
    if (!cached) {
      const spec = readSpec(dir);
      const keeper = spec ? readKeeperRecord(dir) : null;
      if (!spec || !keeper) {
        // Being created by someone (no record yet), or a creation that crashed long ago.
        const age = dirAgeMs(dir);
        if (age !== null && age > this.startTimeoutMs * 3) await this.forceCleanup(id, keeper);
        return null;
      }
      cached = { spec, keeper };
    }
    const keeperAlive = isAlive(cached.keeper.keeper);
    const pid1Alive = keeperAlive && isAlive(cached.keeper.pid1);
    const endAtMs = pid1Alive ? readDeadline(dir) : null;
    if (keeperAlive && pid1Alive && endAtMs !== null && Date.now() < endAtMs + OVERDUE_MS) {
      this.cache.set(id, cached);
      return { id, dir, spec: cached.spec, keeper: cached.keeper, endAtMs };
    }
    this.cache.delete(id);
    if (!keeperAlive || (endAtMs !== null && Date.now() >= endAtMs + OVERDUE_MS)) {
      await this.forceCleanup(id, cached.keeper);
    } else {
      // The keeper is tearing the sandbox down right now; make sure it is not stopped.
      signalIfAlive(cached.keeper.keeper, 'SIGCONT');
    }
    return null;
  }

  /** Checks once that nobody else can write the state we act on (see assertPrivateState). */
  private trustState(): void {
    if (this.stateTrusted) return;
    assertPrivateState(this.stateDir);
    if (existsSync(this.sandboxes)) this.stateTrusted = true;
  }

  /** Does what a keeper would have done: kill everything recorded, remove cgroups and state. */
  private async forceCleanup(id: string, keeper: KeeperRecord | null): Promise<void> {
    this.cache.delete(id);
    if (keeper) {
      signalIfAlive(keeper.keeper, 'SIGKILL');
      signalIfAlive(keeper.pid1, 'SIGKILL');
      signalIfAlive(keeper.bwrap, 'SIGKILL');
      await removeCgroups(keeper.cgroups);
    }
    removeSandboxDir(this.sandboxes, id);
  }
}

function isRealDir(path: string): boolean {
  try {
    const st = lstatSync(path);
    return st.isDirectory() && !st.isSymbolicLink();
  } catch {
    return false;
  }
}

/** The caller gave up before the command started: nothing ran. */
function cancelled(): ProviderError {
  return new ProviderError('conflict', { code: 'cancelled', detail: 'The call was cancelled before the command started.' });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Creates the local provider (bubblewrap sandboxes on this machine). */
export function createLocalProvider(opts?: LocalProviderOpts): Provider {
  return new LocalProvider(opts);
}
