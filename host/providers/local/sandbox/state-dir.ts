// On-disk state of local sandboxes: one private directory per sandbox under the state directory,
// so a restarted server (or another server) finds, verifies and cleans up sandboxes. The
// sandbox's files are not here: /home/user and /tmp are tmpfs mounts that die with the sandbox
// (a template sandbox's whole writable root is one tmpfs on `rw/`, mounted where only the sandbox
// sees it: from the host the directory stays empty).
import { randomBytes } from 'node:crypto';
import { lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import type { EnforcedLimits } from '../limits/enforced.js';
import type { ProcIdentity } from '../system/proc.js';
import { releaseIdBlock } from '../rootfs/id-blocks.js';
import { isSandboxId } from './ids.js';
import type { SandboxSpec } from './spec.js';

/** What the keeper records once the sandbox accepts commands. */
export interface KeeperRecord {
  version: 1;
  keeper: ProcIdentity;
  bwrap: ProcIdentity;
  pid1: ProcIdentity;
  cgroups: string[];
  /** What holds for this sandbox (absent in records of keepers before limits: only spec.cpu/memoryMb, via cgroups). */
  enforced?: EnforcedLimits;
  /**
   * `descriptor`: commands join `cgroups` from inside, through descriptors the server opens (cgroup
   * v1); absent: the host-side join script moves them before nsenter (cgroup v2, older keepers).
   */
  cgroupJoin?: 'descriptor';
  /** The keeper relays to a resident agent at AGENT_SOCKET (absent in records of keepers before residents). */
  resident?: true;
}

/** `$SANDBOX_MCP_STATE_DIR`, else `$XDG_STATE_HOME/sandbox-mcp`, else `~/.local/state/sandbox-mcp`. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SANDBOX_MCP_STATE_DIR) return env.SANDBOX_MCP_STATE_DIR;
  if (env.XDG_STATE_HOME && isAbsolute(env.XDG_STATE_HOME)) return join(env.XDG_STATE_HOME, 'sandbox-mcp');
  return join(homedir(), '.local', 'state', 'sandbox-mcp');
}

/** Where the local provider keeps its sandboxes inside the state directory. */
export function sandboxesDir(stateDir: string): string {
  return join(stateDir, 'local');
}

/** Creates the state and sandboxes directories (0700) and checks that they are ours alone. */
export function ensureSandboxesDir(stateDir: string): string {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const dir = sandboxesDir(stateDir);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  assertPrivateState(stateDir);
  return dir;
}

const NOT_PRIVATE = new ProviderError('permission_denied', {
  code: 'state_dir_not_private',
  detail: 'The state directory belongs to another user or others may write to it; point SANDBOX_MCP_STATE_DIR at a private directory.',
});

function isPrivateDir(st: Stats, uid: number): boolean {
  return st.isDirectory() && st.uid === uid && (st.mode & 0o022) === 0;
}

/**
 * Throws permission_denied unless the state directory and its sandboxes directory are
 * directories of this user that nobody else may write: whoever can write them decides which
 * programs the keeper runs and which pids the provider signals. A missing directory passes.
 */
export function assertPrivateState(stateDir: string): void {
  const uid = process.geteuid?.() ?? 0;
  for (const [path, st] of [
    [stateDir, statSync],
    [sandboxesDir(stateDir), lstatSync],
  ] as const) {
    let stats: Stats;
    try {
      stats = st(path);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    if (!isPrivateDir(stats, uid)) throw NOT_PRIVATE;
  }
}

/** Writes a private file atomically (temp file, then rename). */
export function writePrivateFile(path: string, data: string): void {
  const tmp = `${path}.tmp-${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, data, { mode: 0o600 });
  renameSync(tmp, path);
}

/** Names of the files in a sandbox directory (all 0600; the control socket is reachable only through the 0700 directory). */
export const SPEC_FILE = 'spec.json';
export const KEEPER_FILE = 'keeper.json';
export const DEADLINE_FILE = 'deadline';
export const CREATOR_FILE = 'creator.json';
export const CGROUPS_FILE = 'cgroups.json';
/** The sandbox's exposed ports, as its keeper last wrote them (network/port-forwards.ts). */
export const PORTS_FILE = 'ports.json';
/** Requests the sandbox's egress proxy refused or could not get through, one JSON line each (network/failure-log.ts; the name predates the failures). */
export const FAILURES_FILE = 'network-denials.jsonl';
/** What a workspace's host directory was at create, and the names its directories held (rootfs/workspace.ts). */
export const WORKSPACE_ORIGIN_FILE = 'workspace.json';
export const WORKSPACE_NAMES_FILE = 'workspace-names.json';
/** The keeper's control socket (network/control-channel.ts). */
export const CONTROL_SOCKET = 'control.sock';
/** The keeper's relay to the sandbox's resident agent (keeper/resident-relay.ts); absent in sandboxes of older keepers. */
export const AGENT_SOCKET = 'agent.sock';
/** The resident agent's record (keeper/resident.ts). */
export const RESIDENT_FILE = 'resident.json';
/** Who began ending the sandbox (writeEndingMark); absent while nothing has, and in sandboxes of older keepers. */
export const ENDING_FILE = 'ending';

function readJson<T>(path: string): T | null {
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as T;
  } catch {
    return null;
  }
}

/** The sandbox's spec, or null when missing or of another format. */
export function readSpec(dir: string): SandboxSpec | null {
  const spec = readJson<SandboxSpec>(join(dir, SPEC_FILE));
  return spec && spec.version === 1 ? spec : null;
}

/** The keeper's record, or null before the sandbox was ready (or when unreadable). */
export function readKeeperRecord(dir: string): KeeperRecord | null {
  const rec = readJson<KeeperRecord>(join(dir, KEEPER_FILE));
  return rec && rec.version === 1 ? rec : null;
}

/**
 * Marks the directory as a create in progress of the server process `creator`, first thing after
 * making it: until keeper.json appears, only a live creator keeps another server's sweep away.
 */
export function writeCreator(dir: string, creator: ProcIdentity): void {
  writePrivateFile(join(dir, CREATOR_FILE), JSON.stringify(creator) + '\n');
}

/** The server process that created the sandbox, or null when not recorded (or unreadable). */
export function readCreator(dir: string): ProcIdentity | null {
  const creator = readJson<ProcIdentity>(join(dir, CREATOR_FILE));
  return creator && typeof creator.pid === 'number' && typeof creator.startTime === 'string' ? creator : null;
}

/**
 * Marks the sandbox as ending, by the process `by` — its keeper, whatever ends it (a kill, its
 * deadline, pid 1's end, a fault), or a server's kill before it signals the keeper — before
 * anything in it is killed: every server process then reads a command or resident that vanished
 * as the sandbox ending (sandbox/registry.ts, isStillAlive), not as a failure of a live sandbox.
 */
export function writeEndingMark(dir: string, by: ProcIdentity): void {
  writePrivateFile(join(dir, ENDING_FILE), JSON.stringify(by) + '\n');
}

/** The process that marked the sandbox as ending, or null when none did (or the mark is unreadable). */
export function readEndingMark(dir: string): ProcIdentity | null {
  const by = readJson<ProcIdentity>(join(dir, ENDING_FILE));
  return by && typeof by.pid === 'number' && typeof by.startTime === 'string' ? by : null;
}

/**
 * Lists the cgroups the keeper made, as soon as it made them: a keeper killed before it wrote
 * its record leaves them to whoever cleans up the directory (see readCgroupsList).
 */
export function writeCgroupsList(dir: string, cgroups: readonly string[]): void {
  writePrivateFile(join(dir, CGROUPS_FILE), JSON.stringify(cgroups) + '\n');
}

/** The cgroups listed by writeCgroupsList (none when missing or unreadable). */
export function readCgroupsList(dir: string): string[] {
  const list = readJson<unknown>(join(dir, CGROUPS_FILE));
  return Array.isArray(list) ? list.filter((d): d is string => typeof d === 'string') : [];
}

/** The deadline in epoch milliseconds, or null when unreadable. */
export function readDeadline(dir: string): number | null {
  try {
    const ms = Number(readFileSync(join(dir, DEADLINE_FILE), 'utf8').trim());
    return Number.isFinite(ms) && ms > 0 ? ms : null;
  } catch {
    return null;
  }
}

/**
 * What identifies one version of the deadline file (inode, change time, size), or null when it
 * cannot be seen: writeDeadline replaces the file, so a changed deadline always changes this. One
 * stat, where reading it again is an open, a read and a close (sandbox/registry.ts caches by it).
 */
export function deadlineStamp(dir: string): string | null {
  try {
    const st = statSync(join(dir, DEADLINE_FILE), { bigint: true });
    return `${st.ino}:${st.ctimeNs}:${st.mtimeNs}:${st.size}`;
  } catch {
    return null;
  }
}

/** Atomically replaces the deadline the keeper enforces. */
export function writeDeadline(dir: string, endAtMs: number): void {
  writePrivateFile(join(dir, DEADLINE_FILE), `${Math.round(endAtMs)}\n`);
}

/** The ids of all sandbox directories (ignores tombstones and anything not shaped like an id). */
export function listSandboxIds(sandboxes: string): string[] {
  try {
    return readdirSync(sandboxes).filter(isSandboxId);
  } catch {
    return [];
  }
}

/** Milliseconds since the directory was last modified, or null when it is gone. */
export function dirAgeMs(dir: string): number | null {
  try {
    return Date.now() - statSync(dir).mtimeMs;
  } catch {
    return null;
  }
}

/**
 * Removes a sandbox directory: renamed to a tombstone first (one atomic step, so listings never see
 * a half-removed sandbox and concurrent cleaners cannot both win), then deleted, and the block of
 * host ids a template sandbox held is given back (rootfs/id-blocks.ts). Returns false when it was
 * already gone.
 */
export function removeSandboxDir(sandboxes: string, id: string): boolean {
  const dir = join(sandboxes, id);
  const tomb = join(sandboxes, `.gone-${id}-${randomBytes(4).toString('hex')}`);
  try {
    renameSync(dir, tomb);
  } catch {
    return false;
  }
  const spec = readSpec(tomb);
  if (spec?.root?.mode === 'idrange') releaseIdBlock(spec.identity.uid, dir);
  rmSync(tomb, { recursive: true, force: true });
  return true;
}

/** Deletes tombstones a crashed cleaner left behind. */
export function sweepTombstones(sandboxes: string): void {
  let names: string[];
  try {
    names = readdirSync(sandboxes);
  } catch {
    return;
  }
  for (const name of names) {
    if (name.startsWith('.gone-')) rmSync(join(sandboxes, name), { recursive: true, force: true });
  }
}
