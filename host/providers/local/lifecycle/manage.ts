// list, getInfo, setTimeout and kill of existing sandboxes (create is create.ts). The
// keeper owns each sandbox's deadline: setTimeout rewrites it and signals the keeper, kill asks
// the keeper to end the sandbox and finishes the job itself when the keeper cannot.
// kill marks the sandbox as ending before it signals (see writeEndingMark): its keeper marks it
// too, but one from before the mark does not.
import { existsSync } from 'node:fs';
import type { ListOpts, SandboxMetadata } from '../../provider.js';
import type { CommandRunner } from '../exec/command-runner.js';
import { sandboxGone, type SandboxRegistry } from '../sandbox/registry.js';
import { writeDeadline, writeEndingMark } from '../sandbox/state-dir.js';
import type { LocalSettings } from '../settings.js';
import {
  identify,
  isAlive,
  netNamespace,
  processesInNetNamespace,
  signalIfAlive,
  ticksSinceBoot,
  type ProcIdentity,
} from '../system/proc.js';
import { assertLifetimeS, invalid, isNonNegativeInt } from '../validation.js';
import { sandboxMetadata } from './metadata.js';

/**
 * Waits (at most `waitMs`) until the sandbox's keeper, pid 1 and bwrap are seen gone. Each has had
 * its SIGKILL (from the keeper, or forceCleanup), but a kill is delivered when the process next
 * runs: the keeper waits for bwrap's exit, not pid 1's (bwrap's child), before it removes the
 * directory and exits, so pid 1 may still read as alive for a moment after, longer on a loaded
 * machine (CI saw it once on Node 24), or until thawed where a freezer holds it. Another SIGKILL
 * (identity-checked) covers a keeper that died before sending its own.
 */
async function awaitSandboxGone(procs: readonly (ProcIdentity | undefined)[], waitMs: number): Promise<void> {
  for (const p of procs) signalIfAlive(p, 'SIGKILL');
  const giveUpAtMs = Date.now() + waitMs;
  while (procs.some((p) => isAlive(p)) && Date.now() < giveUpAtMs) await sleep(2);
}

/**
 * The sandbox's own network namespace, read while its pid 1 lives; null when pid 1 is gone or the
 * sandbox shares this server's network (then no process of it can be told apart by namespace).
 */
function ownNetNamespace(pid1: ProcIdentity | undefined): string | null {
  const ns = pid1 ? netNamespace(pid1.pid) : null;
  if (ns === null || !isAlive(pid1) || ns === netNamespace('self')) return null;
  return ns;
}

/**
 * Waits (at most `waitMs`) until no process is left in the sandbox's network namespace `ns`, killing
 * what is: with pid 1 gone, only processes that entered from outside remain there — an nsenter's
 * host-side half (SIGKILLed by the keeper, but exiting when it next runs), the keeper's netns
 * helper, a command of this server still entering. Each would keep the namespace (and its loopback
 * ports) alive after kill returned.
 */
async function awaitNetNamespaceEmpty(ns: string, waitMs: number, startedBy: number | null): Promise<void> {
  const giveUpAtMs = Date.now() + waitMs;
  for (;;) {
    // Never what started after the kill began: the namespace's number, once freed, may be another
    // sandbox's, created meanwhile (its pid 1 killed here would fail its create; proc.ts, startedAfter).
    const left = processesInNetNamespace(ns, startedBy);
    if (left.length === 0 || Date.now() >= giveUpAtMs) return;
    for (const pid of left) {
      for (const sig of ['SIGKILL', 'SIGCONT'] as const) {
        try {
          process.kill(pid, sig);
        } catch {
          // Gone already.
        }
      }
    }
    await sleep(2);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Operations on existing sandboxes; each throws (not yet mapped) on failure. */
export class SandboxLifecycle {
  /** This server process, the writer of the ending marks of its kills. */
  private readonly self: ProcIdentity | null = identify(process.pid);

  constructor(
    private readonly settings: Pick<LocalSettings, 'killWaitMs'>,
    private readonly registry: SandboxRegistry,
    private readonly runner: CommandRunner,
  ) {}

  /** The live sandboxes, oldest first, paged by offset and limit. */
  async list(opts: ListOpts): Promise<SandboxMetadata[]> {
    if (!isNonNegativeInt(opts.offset)) throw invalid('offset must be an integer of at least 0.');
    if (!isNonNegativeInt(opts.limit) || opts.limit < 1) throw invalid('limit must be an integer of at least 1.');
    // Every local sandbox is running; any other status (e.g. paused) matches none.
    if (opts.status !== undefined && opts.status !== 'running') return [];
    if (opts.region !== undefined && opts.region !== 'local') return [];
    // The owner filter comes before the window, so offset and limit count the owner's sandboxes only.
    const found = (await this.registry.inspectAll())
      .filter((sb) => opts.owner === undefined || sb.spec.owner === opts.owner)
      .map((sb) => sandboxMetadata(sb.spec, sb.keeper, sb.endAtMs));
    found.sort((a, b) => (a.started_at! < b.started_at! ? -1 : a.started_at! > b.started_at! ? 1 : a.sandbox_id < b.sandbox_id ? -1 : 1));
    return found.slice(opts.offset, opts.offset + opts.limit);
  }

  /** The metadata of one live sandbox. */
  async getInfo(sandboxId: string): Promise<SandboxMetadata> {
    const sb = await this.registry.require(sandboxId);
    return sandboxMetadata(sb.spec, sb.keeper, sb.endAtMs);
  }

  /** The owner its spec records, or null. */
  async getOwner(sandboxId: string): Promise<string | null> {
    return (await this.registry.require(sandboxId)).spec.owner ?? null;
  }

  /** The create envs its spec records: every command starts with them. */
  async getEnvironment(sandboxId: string): Promise<Record<string, string>> {
    return { ...(await this.registry.require(sandboxId)).spec.envs };
  }

  /** Moves the sandbox's deadline to `timeoutS` from now. */
  async setTimeout(sandboxId: string, timeoutS: number): Promise<void> {
    assertLifetimeS(timeoutS);
    const sb = await this.registry.require(sandboxId);
    try {
      writeDeadline(sb.dir, Date.now() + timeoutS * 1000);
    } catch {
      throw sandboxGone();
    }
    signalIfAlive(sb.keeper.keeper, 'SIGCONT');
    if (!signalIfAlive(sb.keeper.keeper, 'SIGUSR1')) {
      await this.registry.inspect(sandboxId);
      throw sandboxGone();
    }
  }

  /** Ends the sandbox and everything in it, and removes its state. */
  async kill(sandboxId: string): Promise<void> {
    const sb = await this.registry.require(sandboxId);
    const keeper = sb.keeper.keeper;
    const netNs = ownNetNamespace(sb.keeper.pid1);
    const killedAt = ticksSinceBoot();
    // A kill that fails midway leaves nothing that counts: the mark counts while this process
    // runs, and kill ends with the directory gone (the keeper's removal or forceCleanup's).
    if (this.self) {
      try {
        writeEndingMark(sb.dir, this.self);
      } catch {
        // The directory is going already: the sandbox is ending.
      }
    }
    // A stopped keeper would never act on SIGTERM.
    signalIfAlive(keeper, 'SIGCONT');
    signalIfAlive(keeper, 'SIGTERM');
    const giveUpAtMs = Date.now() + this.settings.killWaitMs;
    while (isAlive(keeper) && Date.now() < giveUpAtMs) await sleep(2);
    // The keeper normally removed everything; finish the job if it died or hung midway.
    if (isAlive(keeper) || existsSync(sb.dir)) await this.registry.forceCleanup(sandboxId, sb.keeper);
    await awaitSandboxGone([keeper, sb.keeper.pid1, sb.keeper.bwrap], this.settings.killWaitMs);
    this.registry.forget(sandboxId);
    // Commands of ours still waiting on the dead sandbox (e.g. a stopped nsenter) end now.
    this.runner.killCommands(sandboxId);
    if (netNs !== null) await awaitNetNamespaceEmpty(netNs, this.settings.killWaitMs, killedAt);
  }
}
