// create: validate the options, check the host once, find the template, pick the sandbox's
// identity, write its creator mark, spec and deadline, then start its keeper and wait for the ready
// report. A failed start leaves no state.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { formatAllowEntry, parseAllowEntry, type NetworkPolicy } from '../../network-policy.js';
import { definedFields } from '../../../util/defined-fields.js';
import type { CreateOpts, SandboxMetadata } from '../../provider.js';
import { keeperFailureError, LOCAL_DETAILS, toProviderError, userProcessLimitError } from '../errors.js';
import type { KeeperReport } from '../keeper/report.js';
import { startKeeper } from '../keeper/start.js';
import type { Identity, ToolPaths } from '../launch/command-lines.js';
import { exceedsCeiling, unceiledMemory } from '../limits/memory-ceiling.js';
import { memoryCeilingReached, tooManySandboxes } from '../limits/notes.js';
import { chooseSandboxLimits, type SandboxLimits } from '../limits/sandbox-limits.js';
import { newSandboxId, newSandboxUid } from '../sandbox/ids.js';
import { withCreateLock } from '../sandbox/create-lock.js';
import type { SandboxRegistry } from '../sandbox/registry.js';
import { buildSandboxSpec, type SandboxSpec, type SpecUser, type SpecWorkspace, type TemplateRoot } from '../sandbox/spec.js';
import { recordWorkspaceOrigin, specWorkspace } from '../rootfs/workspace.js';
import { HostViews } from '../rootfs/host-views.js';
import { claimIdBlock, releaseIdBlock } from '../rootfs/id-blocks.js';
import { resolveTemplateRoot, templateEnv, templateShell } from '../rootfs/template-root.js';
import { layerOwnersHere } from '../templates/import-root.js';
import { BASE_TEMPLATE } from '../templates/base-template.js';
import { imageUserPlan, type ImageUserIds } from '../templates/images/image-user.js';
import { isStorableTemplateRef, listTemplates, mayUseTemplate, readTemplate, resolveTemplateRef, templateRef } from '../templates/store.js';
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
import {
  isOutOfProcesses,
  KEEPER_START_TASKS,
  NETNS_HELPER_START_TASKS,
  nearProcessLimit,
  shortOfProcesses,
} from '../system/user-processes.js';
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

  /** The host directories sandboxes bind (the agent's runtime, the base view's /etc). */
  private readonly views: HostViews;

  constructor(
    private readonly settings: LocalSettings,
    private readonly registry: SandboxRegistry,
  ) {
    this.views = new HostViews(settings.stateDir, settings.isRoot, process.execPath);
  }

  /** The server's own directories, which no sandbox may see even under a path bound read-only. */
  private privateDirs(): string[] {
    return [this.settings.stateDir, this.settings.templatesDir, this.views.cacheDir()];
  }

  /** Creates a running sandbox and returns its metadata; throws (not yet mapped) on any failure. */
  async create(opts: CreateOpts): Promise<SandboxMetadata> {
    // The spec records the template's reference: a user's plain name may mean their own one.
    const template =
      (opts.template ?? BASE_TEMPLATE) === BASE_TEMPLATE ? BASE_TEMPLATE : this.templateRefFor(opts.template!, opts.templateUser);
    const root = template === BASE_TEMPLATE ? undefined : this.templateRoot(template);
    if (opts.region !== undefined && opts.region !== 'local') throw invalid(LOCAL_DETAILS.regionOnlyLocal);
    const timeoutS = opts.timeoutS ?? this.settings.defaultTimeoutS;
    assertLifetimeS(timeoutS);
    const limits = chooseSandboxLimits(this.settings.limits, { cpu: opts.cpu, memoryMb: opts.memoryMb });
    // The template's own variables (a Debian build's DEBIAN_FRONTEND) first: create's envs win.
    const envs = { ...(root ? templateEnv(this.settings.templatesDir, template) : {}), ...validateEnvs(opts.envs, 'envs') };
    const allowOut = opts.network !== undefined ? canonicalAllowOut(opts.network) : undefined;
    this.tools ??= preflight(this.settings);
    const tools = this.tools;
    // A keeper short of its first threads hangs, unseen, until the start timeout: said at once. An
    // allow-list's proxy needs the keeper's netns helper too (a node of its own) before the start ends.
    const short = shortOfProcesses(KEEPER_START_TASKS + (allowOut?.length ? NETNS_HELPER_START_TASKS : 0));
    if (short) throw userProcessLimitError(short);

    const workspace =
      opts.workspace !== undefined
        ? specWorkspace(opts.workspace, this.privateDirs(), this.settings.isRoot ? this.views.rootMountPoint() : undefined)
        : undefined;

    const sandboxes = ensureSandboxesDir(this.settings.stateDir);
    // A template sandbox's ids are claimed once its directory exists (createWith).
    const identity = root ? null : this.newIdentity(sandboxes);
    try {
      const id = await this.claimDirectory(sandboxes, limits);
      const record = root ? readTemplate(this.settings.templatesDir, template) : undefined;
      const image = record?.image;
      const workingDir = image?.config.working_dir.startsWith('/') ? image.config.working_dir : undefined;
      // The image's user: only where the sandbox maps a block of ids (a root server's `idrange` root).
      const plan = imageUserPlan(image, root?.mode === 'idrange' && record ? record.owners : 'flattened');
      const user = plan && 'user' in plan ? specUser(plan.user, image!.config.env) : undefined;
      return await this.createWith(
        sandboxes,
        id,
        { template, root, identity, workspace, workingDir, user },
        timeoutS,
        envs,
        limits,
        allowOut,
        tools,
        opts,
      );
    } catch (e) {
      throw asUserProcessLimit(e);
    } finally {
      if (identity) this.pendingUids.delete(identity.uid);
    }
  }

  /**
   * The stored templates this server can run (for create_sandbox's description), by reference:
   * those `user` may use, or every one (the operator, admins); none when the store cannot be read.
   */
  templateNames(user?: string): string[] {
    return listTemplates(this.settings.templatesDir)
      .filter((t) => t.owners === layerOwnersHere() && mayUseTemplate(t, user))
      .map((t) => templateRef(t));
  }

  /** The reference of the template `requested` means to `user` (store.ts); not_found, the same as a missing one, for another user's. */
  private templateRefFor(requested: string, user: string | undefined): string {
    const ref = typeof requested === 'string' ? resolveTemplateRef(this.settings.templatesDir, requested, user) : undefined;
    if (ref === undefined) throw new ProviderError('not_found', { code: 'template_not_found', detail: LOCAL_DETAILS.templateNotFound });
    return ref;
  }

  /** The root of a sandbox on stored template `name` (a reference; throws not_found naming `template` for an unknown one). */
  private templateRoot(name: string): TemplateRoot {
    if (typeof name !== 'string' || !isStorableTemplateRef(name)) {
      throw new ProviderError('not_found', { code: 'template_not_found', detail: LOCAL_DETAILS.templateNotFound });
    }
    return resolveTemplateRoot(this.settings.templatesDir, name, this.settings.isRoot);
  }

  /**
   * A template sandbox's identity: as root, a block of host ids of its own, claimed machine-wide for
   * `dir` (rootfs/id-blocks.ts); else the server's own uid, root inside.
   */
  private templateIdentity(dir: string): Identity {
    if (!this.settings.isRoot) return { ...this.settings.identity, dropPrivileges: false };
    let first: number;
    try {
      first = claimIdBlock(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOSPC') {
        throw new ProviderError('insufficient_resources', { code: 'id_blocks_exhausted', detail: LOCAL_DETAILS.idBlocksExhausted });
      }
      throw e;
    }
    return { uid: first, gid: first, dropPrivileges: true };
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
    kind: {
      template: string;
      root: TemplateRoot | undefined;
      identity: Identity | null;
      workspace: SpecWorkspace | undefined;
      workingDir: string | undefined;
      user: SpecUser | undefined;
    },
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
    let identity = kind.identity;
    try {
      identity ??= this.templateIdentity(dir);
      spec = buildSandboxSpec(
        {
          network: this.settings.network,
          roBinds: this.settings.roBinds,
          privateDirs: this.privateDirs(),
          residentAgent: this.settings.residentAgent,
          residentIdleExitS: this.settings.residentIdleExitS,
        },
        {
          id,
          createdAtMs,
          template: kind.template,
          envs,
          cpu: opts.cpu ?? null,
          memoryMb: opts.memoryMb ?? null,
          identity,
          tools,
          limits,
          shell: kind.root ? templateShell(kind.root.layers) : this.settings.shell,
          runtimeDir: this.views.runtimeDir(),
          ...definedFields({
            root: kind.root && kind.root.mode === 'idrange' ? { ...kind.root, mountPoint: this.views.rootMountPoint() } : kind.root,
            baseEtcDir: kind.root ? undefined : this.views.baseEtcDir(),
            allowOut,
            owner: opts.owner,
            workspace: kind.workspace,
            workingDir: kind.workingDir,
            user: kind.user,
          }),
        },
      );
      writePrivateFile(join(dir, SPEC_FILE), JSON.stringify(spec) + '\n');
      writeDeadline(dir, createdAtMs + timeoutS * 1000);
      // Before the keeper mounts anything: the directory's state at create, its instant first.
      const origin = kind.workspace ? recordWorkspaceOrigin(dir, kind.workspace.hostPath) : undefined;
      // Observed at once: a failed start must not leave its rejection unhandled.
      const recorded = origin?.done.then(
        () => null,
        (e: unknown) => e,
      );
      const reporting = startKeeper(dir, this.settings);
      origin?.names();
      report = await reporting;
      const failure = await recorded;
      if (failure) throw failure;
    } catch (e) {
      await this.registry.forceCleanup(id, readKeeperRecord(dir));
      // Before the spec existed, the directory's removal could not tell which block to give back.
      if (kind.root && identity && this.settings.isRoot) releaseIdBlock(identity.uid, dir);
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

/**
 * The spec's record of an image's user: HOME the image's Env names (absolute), else its passwd
 * entry's (`/` for a user passwd lacks, and in records from before homes were kept).
 */
function specUser(ids: ImageUserIds, imageEnv: readonly string[]): SpecUser {
  const envHome = imageEnv.findLast((e) => e.startsWith('HOME=/'))?.slice('HOME='.length);
  const home = envHome ?? ids.home ?? '/';
  // Where a command without cwd runs: that home, if the image has it as a directory (else `/`).
  const homeIsDir = home === '/' || (home === ids.home && ids.home_is_dir === true);
  return { uid: ids.uid, gid: ids.gid, ...definedFields({ name: ids.name }), home, homeIsDir };
}

/**
 * `e`, or — when it is a failure to start (not a refusal) and the server's user is left with too
 * few processes below its limit — the user's process limit, named. Near that limit whichever of
 * the keeper, bwrap, its namespaces or a helper fails to fork decides how the failure looks (a
 * keeper fault, a timeout, "bwrap is not installed", "user namespaces refused"; see
 * system/user-processes.ts), so the limit is checked after any of them.
 */
export function asUserProcessLimit(e: unknown): unknown {
  const err = toProviderError(e);
  const isStartFailure =
    err.category === 'unavailable' ||
    err.category === 'internal' ||
    err.category === 'timeout' ||
    (err.category === 'insufficient_resources' && (isOutOfProcesses(err.code) || err.code === 'start_out_of_resources'));
  if (!isStartFailure) return e;
  const near = nearProcessLimit();
  return near ? userProcessLimitError(near) : e;
}
