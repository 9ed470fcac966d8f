// create: validate the options, check the host once, pick the sandbox's identity, write its
// creator mark, spec and deadline, then start its keeper and wait for the ready report. A failed
// start leaves no state.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { formatAllowEntry, parseAllowEntry, type NetworkPolicy } from '../../network-policy.js';
import { definedFields } from '../../../util/defined-fields.js';
import type { CreateOpts, SandboxMetadata } from '../../provider.js';
import { keeperFailureError, LOCAL_DETAILS } from '../errors.js';
import type { KeeperReport } from '../keeper/report.js';
import { startKeeper } from '../keeper/start.js';
import type { Identity, ToolPaths } from '../launch/command-lines.js';
import { exceedsCeiling, unceiledMemory } from '../limits/memory-ceiling.js';
import { memoryCeilingReached, tooManySandboxes } from '../limits/notes.js';
import { chooseSandboxLimits, type SandboxLimits } from '../limits/sandbox-limits.js';
import { newSandboxId, newSandboxUid } from '../sandbox/ids.js';
import { withCreateLock } from '../sandbox/create-lock.js';
import type { SandboxRegistry } from '../sandbox/registry.js';
import { buildSandboxSpec, type SandboxSpec } from '../sandbox/spec.js';
import {
  ensureSandboxesDir,
  listSandboxIds,
  readDeadline,
  readKeeperRecord,
  readSpec,
  removeSandboxDir,
  SPEC_FILE,
  writeCreator,
  writeDeadline,
  writePrivateFile,
} from '../sandbox/state-dir.js';
import type { LocalSettings } from '../settings.js';
import { findExecutable, preflight } from '../system/preflight.js';
import { identify, type ProcIdentity } from '../system/proc.js';
import { assertLifetimeS, invalid, validateEnvs } from '../validation.js';
import { sandboxMetadata } from './metadata.js';

/** The allow-list of a network policy in canonical form; invalid_argument naming the field for an entry that is not one. */
function canonicalAllowOut(policy: NetworkPolicy): string[] {
  return policy.allowOut.map((text) => {
    const entry = parseAllowEntry(text);
    if (!entry) throw invalid('network.allow_out: an entry is not a host name, *.suffix or IP address with an optional :port.');
    return formatAllowEntry(entry);
  });
}

/** Creates sandboxes; holds what concurrent creates of one instance share (tools, uids in use). */
export class SandboxCreator {
  private tools: ToolPaths | null = null;
  /** Uids handed to creates still in progress (not yet visible in the state directory). */
  private readonly pendingUids = new Set<number>();
  /** The flock binary the create lock is taken with (found once). */
  private flock: string | null = null;
  /** This server process, recorded in each directory it creates (see writeCreator). */
  private readonly self: ProcIdentity | null = identify(process.pid);

  constructor(
    private readonly settings: LocalSettings,
    private readonly registry: SandboxRegistry,
  ) {}

  /** Creates a running sandbox and returns its metadata; throws (not yet mapped) on any failure. */
  async create(opts: CreateOpts): Promise<SandboxMetadata> {
    if (opts.template !== undefined && opts.template !== 'base') {
      throw new ProviderError('not_found', { code: 'template_not_found', detail: LOCAL_DETAILS.templateOnlyBase });
    }
    if (opts.region !== undefined && opts.region !== 'local') throw invalid(LOCAL_DETAILS.regionOnlyLocal);
    const timeoutS = opts.timeoutS ?? this.settings.defaultTimeoutS;
    assertLifetimeS(timeoutS);
    const limits = chooseSandboxLimits(this.settings.limits, { cpu: opts.cpu, memoryMb: opts.memoryMb });
    const envs = validateEnvs(opts.envs, 'envs');
    const allowOut = opts.network !== undefined ? canonicalAllowOut(opts.network) : undefined;
    this.tools ??= preflight(this.settings);
    const tools = this.tools;

    const sandboxes = ensureSandboxesDir(this.settings.stateDir);
    const identity = this.newIdentity(sandboxes);
    try {
      const id = await this.claimDirectory(sandboxes, limits);
      return await this.createWith(sandboxes, id, identity, timeoutS, envs, limits, allowOut, tools, opts);
    } finally {
      this.pendingUids.delete(identity.uid);
    }
  }

  /**
   * Makes the new sandbox's directory (marked with its creator) and returns its id, or throws
   * insufficient_resources when the state directory already holds the server's maximum of
   * sandboxes (live ones and creates in progress, of every server sharing it). Counting and
   * making happen under the state directory's create lock, so concurrent creates of any number of
   * server processes cannot both take the last place. Listing is cheap; only at the maximum are
   * the sandboxes checked against /proc (outside the lock), which cleans up the dead ones.
   */
  private async claimDirectory(sandboxes: string, limits: SandboxLimits): Promise<string> {
    const { maxSandboxes: max, maxTotalMemoryMb: ceilingMb } = this.settings.limits;
    this.flock ??= findExecutable('flock') ?? 'flock';
    for (const isFirstLook of [true, false]) {
      const id = await withCreateLock(sandboxes, this.flock, () => {
        if (listSandboxIds(sandboxes).length >= max) return null;
        // Where no parent cgroup holds the ceiling, the running sandboxes' limits are counted.
        const unceiled = unceiledMemory(sandboxes);
        if (exceedsCeiling(unceiled, limits.memoryMb, ceilingMb)) {
          throw memoryCeilingReached(
            ceilingMb,
            unceiled.limitsMb.reduce((a, b) => a + b, 0),
          );
        }
        const newId = newSandboxId();
        const dir = join(sandboxes, newId);
        mkdirSync(dir, { mode: 0o700 });
        // From now on, another server's sweep leaves this directory alone while we live.
        if (this.self) writeCreator(dir, this.self);
        return newId;
      });
      if (id !== null) return id;
      if (isFirstLook) await this.registry.inspectAll();
    }
    throw tooManySandboxes(max);
  }

  /** As root, a uid no live sandbox of this state directory (or a create in progress) uses. */
  private newIdentity(sandboxes: string): Identity {
    if (!this.settings.uidPerSandbox) return this.settings.identity;
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
    id: string,
    identity: Identity,
    timeoutS: number,
    envs: Record<string, string>,
    limits: SandboxLimits,
    allowOut: string[] | undefined,
    tools: ToolPaths,
    opts: CreateOpts,
  ): Promise<SandboxMetadata> {
    const dir = join(sandboxes, id);
    const createdAtMs = Date.now();
    let spec: SandboxSpec;
    let report: KeeperReport;
    try {
      spec = buildSandboxSpec(this.settings, {
        id,
        createdAtMs,
        envs,
        cpu: opts.cpu ?? null,
        memoryMb: opts.memoryMb ?? null,
        identity,
        tools,
        limits,
        ...definedFields({ allowOut, owner: opts.owner }),
      });
      writePrivateFile(join(dir, SPEC_FILE), JSON.stringify(spec) + '\n');
      writeDeadline(dir, createdAtMs + timeoutS * 1000);
      report = await startKeeper(dir, this.settings);
    } catch (e) {
      await this.registry.forceCleanup(id, readKeeperRecord(dir));
      throw e;
    }
    if (!report.ok) {
      removeSandboxDir(sandboxes, id);
      throw keeperFailureError(report.code);
    }
    const keeper = readKeeperRecord(dir);
    if (!keeper) {
      await this.registry.forceCleanup(id, null);
      throw new ProviderError('internal');
    }
    this.registry.remember(id, spec, keeper);
    return sandboxMetadata(spec, keeper, readDeadline(dir) ?? createdAtMs + timeoutS * 1000);
  }
}
