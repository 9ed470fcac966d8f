// Finding live sandboxes: through their state directories, verified against /proc (a recorded
// pid counts only while its start time matches). Whatever is found dead or overdue is cleaned
// up on the spot, so callers see a sandbox as either live or absent; a create still in progress
// (in this server or another) is absent but left alone.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS } from '../errors.js';
import type { LocalSettings } from '../settings.js';
import { removeCgroups, removeEmptyCeilings } from '../system/cgroups.js';
import { isAlive, signalIfAlive } from '../system/proc.js';
import { isSandboxId } from './ids.js';
import type { SandboxSpec } from './spec.js';
import {
  assertPrivateState,
  dirAgeMs,
  listSandboxIds,
  readCgroupsList,
  deadlineStamp,
  readCreator,
  readDeadline,
  readEndingMark,
  readKeeperRecord,
  readSpec,
  removeSandboxDir,
  sweepTombstones,
  type KeeperRecord,
} from './state-dir.js';

// A keeper this late past its deadline is presumed stuck: the provider enforces the deadline itself.
const OVERDUE_MS = 5_000;

/** A sandbox verified live just now: its spec, its keeper's record and its current deadline. */
export interface LiveSandbox {
  id: string;
  dir: string;
  spec: SandboxSpec;
  keeper: KeeperRecord;
  endAtMs: number;
}

/** The not_found error for a sandbox that does not exist (any more). */
export function sandboxGone(): ProviderError {
  return new ProviderError('not_found', { detail: LOCAL_DETAILS.sandboxGone });
}

/**
 * True while the sandbox's pid 1 and its keeper both still run and nothing has begun ending it:
 * what decides whether a call that lost its command or resident answers not_found. The keeper
 * stops what runs in the sandbox (the resident's and commands' host-side halves among the first)
 * before pid 1 is seen gone, so pids alone would call a sandbox being killed alive for a moment.
 */
export function isStillAlive(sb: LiveSandbox): boolean {
  return isAlive(sb.keeper.pid1) && isAlive(sb.keeper.keeper) && !isMarkedEnding(sb.dir);
}

/**
 * Whether the sandbox in `dir` is marked as ending (state-dir.ts, writeEndingMark). A mark counts
 * while the process that wrote it runs: the keeper's until the sandbox is gone; a server kill's
 * for the kill's length, after which the directory is gone too. So a kill that died midway leaves
 * no mark that would make a live sandbox read as ending. Sandboxes of older servers have none.
 * No directory at all counts as a mark: only an ending removes it, and its keeper and pid 1 (a
 * zombie still has its /proc entry) may be seen alive for a moment after.
 */
export function isMarkedEnding(dir: string): boolean {
  const by = readEndingMark(dir);
  if (by !== null) return isAlive(by);
  return !existsSync(dir);
}

/** A sandbox's records as cached, with the deadline last read and the stamp of the file it was read from. */
interface CachedRecords {
  spec: SandboxSpec;
  keeper: KeeperRecord;
  deadline?: { stamp: string; endAtMs: number | null };
}

/**
 * The sandboxes of one state directory, with their records cached while they stay verifiably live.
 * Liveness is checked against /proc on every look; the deadline is read again only when its file
 * changed (deadlineStamp): any server, or the dashboard, may have set it since.
 */
export class SandboxRegistry {
  private readonly cache = new Map<string, CachedRecords>();
  private isStateTrusted = false;

  constructor(private readonly settings: Pick<LocalSettings, 'stateDir' | 'sandboxes' | 'startTimeoutMs'>) {}

  /** Records a sandbox just created by this instance. */
  remember(id: string, spec: SandboxSpec, keeper: KeeperRecord): void {
    this.cache.set(id, { spec, keeper });
  }

  /** Drops one sandbox's cached records (it was killed). */
  forget(id: string): void {
    this.cache.delete(id);
  }

  /** Drops every cached record. */
  clear(): void {
    this.cache.clear();
  }

  /** The live sandbox `sandboxId`; throws not_found otherwise. */
  async require(sandboxId: string): Promise<LiveSandbox> {
    if (typeof sandboxId !== 'string') throw sandboxGone();
    const sb = await this.inspect(sandboxId);
    if (!sb) throw sandboxGone();
    return sb;
  }

  /**
   * Finds a sandbox and verifies its keeper and pid 1 against /proc (pid reuse: start times must
   * match). Dead or half-dead sandboxes are cleaned up and reported as absent (null).
   */
  async inspect(id: string): Promise<LiveSandbox | null> {
    if (!isSandboxId(id)) return null;
    this.trustState();
    const dir = join(this.settings.sandboxes, id);
    let cached = this.cache.get(id);
    if (!cached) {
      const found = this.readRecords(dir);
      if (found === 'starting') return null;
      if (found === 'abandoned') {
        await this.forceCleanup(id, null);
        return null;
      }
      cached = found;
    }
    const keeperAlive = isAlive(cached.keeper.keeper);
    const pid1Alive = keeperAlive && isAlive(cached.keeper.pid1);
    const endAtMs = pid1Alive ? this.deadlineOf(dir, cached) : null;
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

  /**
   * When the sandbox's lifetime ends, for a renewal's look: a sandbox this registry verified once
   * is not checked against /proc again (the setTimeout that may follow does that), only its
   * deadline read (a stat, unless its file changed). One not cached, without a deadline or overdue
   * gets inspect's full look (and its cleanup); throws not_found when it is gone.
   */
  async lifetimeEndMs(id: string): Promise<number> {
    const cached = isSandboxId(id) ? this.cache.get(id) : undefined;
    const endAtMs = cached ? this.deadlineOf(join(this.settings.sandboxes, id), cached) : null;
    if (endAtMs !== null && Date.now() < endAtMs + OVERDUE_MS) return endAtMs;
    return (await this.require(id)).endAtMs;
  }

  /** The deadline in `dir`, read again only when its file is not the one `cached` read it from. */
  private deadlineOf(dir: string, cached: CachedRecords): number | null {
    const stamp = deadlineStamp(dir);
    if (stamp === null) return readDeadline(dir);
    if (cached.deadline?.stamp !== stamp) {
      // Stamped before the read: a write between the two leaves an older stamp, read again next time.
      cached.deadline = { stamp, endAtMs: readDeadline(dir) };
    }
    return cached.deadline.endAtMs;
  }

  /**
   * Every live sandbox of the state directory (in no particular order); whatever is dead is
   * cleaned up on the way (this is also the start-up sweep, see sweep.ts).
   */
  async inspectAll(): Promise<LiveSandbox[]> {
    this.trustState();
    sweepTombstones(this.settings.sandboxes);
    const live: LiveSandbox[] = [];
    for (const id of listSandboxIds(this.settings.sandboxes)) {
      const sb = await this.inspect(id);
      if (sb) live.push(sb);
    }
    return live;
  }

  /**
   * The records of a sandbox directory, or what its lack of them means: `starting` while a
   * create may still be filling it in, `abandoned` once none can.
   */
  private readRecords(dir: string): CachedRecords | 'starting' | 'abandoned' {
    const spec = readSpec(dir);
    const keeper = spec ? readKeeperRecord(dir) : null;
    if (spec && keeper) return { spec, keeper };
    if (this.mayBeStarting(dir)) return 'starting';
    // Read again: a record written since the first look belongs to a create that got through
    // (its creator may have returned the id and only then died).
    const specNow = readSpec(dir);
    const keeperNow = specNow ? readKeeperRecord(dir) : null;
    return specNow && keeperNow ? { spec: specNow, keeper: keeperNow } : 'abandoned';
  }

  /**
   * True while a create of `dir` may be in progress: its creating server still runs (pid and start
   * time), or — no creator recorded yet (the instant after mkdir) or ever (older servers) — the
   * directory is younger than any create may take.
   */
  private mayBeStarting(dir: string): boolean {
    const creator = readCreator(dir);
    if (creator) return isAlive(creator);
    const age = dirAgeMs(dir);
    return age === null || age <= this.settings.startTimeoutMs * 3;
  }

  /** Checks once that nobody else can write the state we act on (see assertPrivateState). */
  trustState(): void {
    if (this.isStateTrusted) return;
    assertPrivateState(this.settings.stateDir);
    if (existsSync(this.settings.sandboxes)) this.isStateTrusted = true;
  }

  /** Does what a keeper would have done: kill everything recorded, remove cgroups and state. */
  async forceCleanup(id: string, keeper: KeeperRecord | null): Promise<void> {
    this.cache.delete(id);
    if (keeper) {
      signalIfAlive(keeper.keeper, 'SIGKILL');
      signalIfAlive(keeper.pid1, 'SIGKILL');
      signalIfAlive(keeper.bwrap, 'SIGKILL');
    }
    // Without a record (its keeper died while starting), the cgroups it made are listed on their own.
    const cgroups = keeper?.cgroups ?? readCgroupsList(join(this.settings.sandboxes, id));
    await removeCgroups(cgroups);
    removeEmptyCeilings(cgroups);
    removeSandboxDir(this.settings.sandboxes, id);
  }
}
