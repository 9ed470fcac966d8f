// The local provider: bubblewrap sandboxes on this machine, each kept by a detached keeper
// process that owns its deadline. This file only composes the parts and is the boundary where
// every failure leaves as a ProviderError. The parts, by folder:
//   lifecycle/  create, list, getInfo, setTimeout and kill
//   exec/       running one command inside a sandbox (enter, capture, the runner), and interactive
//               terminals on a fresh pty (terminal.ts)
//   files/      reading, writing and listing files, by scripts run inside
//   sandbox/    what a sandbox is on disk (spec, ids, state directory) and finding the live ones
//   keeper/     the per-sandbox keeper process, and starting it
//   network/    the host side of a sandbox's network: egress proxy, exposed ports, control socket
//   launch/     pure builders: the bwrap argv, the launch, enter and terminal command lines, passwd,
//               environment; the perl helpers' commands (helpers/ holds the helpers)
//   rootfs/     what a sandbox sees as its system: the base view, a template's writable root and
//               ids, the agent's runtime
//   system/     this machine: /proc, cgroups, inherited descriptors, the tools (preflight)
//   templates/  root filesystems sandboxes can run on: the store, and making, removing, snapshotting
import type {
  AgentChannel,
  CreateOpts,
  ExecOpts,
  ExecResult,
  ExposedPort,
  FileEntry,
  NetworkDescription,
  ListFilesOpts,
  ListOpts,
  PromotableExecOpts,
  PromotableOutcome,
  Provider,
  ReadFileOpts,
  EgressWindow,
  ReadFileResult,
  SandboxMetadata,
  SandboxWorkspace,
  SnapshotOpts,
  SnapshotResult,
  SandboxUsage,
  TerminalOpts,
  TerminalSession,
  WriteFileOpts,
} from '../provider.js';
import { agentRuntimeArgv } from '../../../shared/agent-runtime.js';
import { agentSupportsRunAs } from '../../../shared/protocol.js';
import { toProviderError } from './errors.js';
import { CommandRunner } from './exec/command-runner.js';
import { SandboxExec } from './exec/exec.js';
import { boundsFor, commandOutOfProcesses } from './exec/resident-exec.js';
import { ResidentLinks } from './exec/resident-link.js';
import { asAgentChannel } from '../resident-channel.js';
import { processLimitReached } from './limits/notes.js';
import { COMMAND_OOM_SCORE_ADJ } from './limits/entry-prelude.js';
import { stopLeftovers } from './exec/stop-processes.js';
import { SandboxTerminals } from './exec/terminal.js';
import { SandboxFiles } from './files/operations.js';
import { SandboxCreator } from './lifecycle/create.js';
import { SandboxLifecycle } from './lifecycle/manage.js';
import { limitNotes } from './limits/limit-watch.js';
import { sandboxUsage } from './limits/sandbox-usage.js';
import { describeSandboxNetwork } from './network/describe.js';
import { egressNotes } from './network/failure-notes.js';
import { SandboxPorts } from './network/expose.js';
import { FailureReporter } from './network/failure-reporter.js';
import { localWorkspace, templateHoldsWorkspace, workspaceSnapshotRefused } from './rootfs/workspace.js';
import { SandboxRegistry } from './sandbox/registry.js';
import { sweepDeadSandboxes } from './sandbox/sweep.js';
import { resolveSettings, type LocalProviderOpts } from './settings.js';
import { LocalTemplates } from './templates/local-templates.js';
import { localSnapshotNote } from './templates/snapshot.js';
import { templateRef } from './templates/store.js';
import { liveWritableLayer } from './rootfs/writable-layer.js';
import { specTemplate } from './sandbox/spec.js';

export { MIN_MEMORY_MB } from './limits/settings.js';
export type { LocalTemplates, TemplateDetails } from './templates/local-templates.js';
export { defaultKeeperScript, type LocalProviderOpts } from './settings.js';
export type { EgressFailureReport, EgressFailureListener } from './network/failure-reporter.js';
export { isRefusal } from './network/egress-failures.js';

/** Name of this provider (prefix of qualified ids). */
export const LOCAL_PROVIDER_ID = 'local';

/** Awaits `run` and rethrows whatever it throws as a ProviderError (never a foreign message). */
async function asProviderErrors<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw toProviderError(e);
  }
}

/** The local provider (see the module comment). Use createLocalProvider. */
export class LocalProvider implements Provider {
  readonly id = LOCAL_PROVIDER_ID;
  private readonly registry: SandboxRegistry;
  private readonly creator: SandboxCreator;
  private readonly lifecycle: SandboxLifecycle;
  private readonly commands: SandboxExec;
  private readonly files: SandboxFiles;
  private readonly ports: SandboxPorts;
  /** Passes the egress proxies' recorded failures on after each command and before each kill. */
  private readonly failures: FailureReporter;
  private readonly terminals: SandboxTerminals;
  /** Channels to the sandboxes' resident agents (exec/resident-link.ts). */
  private readonly residents = new ResidentLinks();
  private readonly runner: CommandRunner;
  private readonly templates: LocalTemplates;
  private readonly maxSnapshotStorageBytes: number;
  /** The start-up sweep of dead sandboxes (sandbox/sweep.ts), running in the background. */
  private readonly sweep: Promise<number>;

  constructor(opts: LocalProviderOpts = {}) {
    const settings = resolveSettings(opts);
    const runner = new CommandRunner(settings);
    this.runner = runner;
    this.registry = new SandboxRegistry(settings);
    this.creator = new SandboxCreator(settings, this.registry);
    this.lifecycle = new SandboxLifecycle(settings, this.registry, runner);
    this.commands = new SandboxExec(this.registry, runner, this.residents);
    this.files = new SandboxFiles(settings, this.registry, runner, this.residents);
    this.ports = new SandboxPorts(this.registry);
    this.failures = new FailureReporter(settings.sandboxes, settings.onEgressFailure);
    this.terminals = new SandboxTerminals(settings, this.registry, runner);
    this.templates = new LocalTemplates(settings, this.registry);
    this.maxSnapshotStorageBytes = settings.maxSnapshotStorageBytes;
    this.sweep = sweepDeadSandboxes(this.registry, settings.sandboxes);
  }

  /**
   * The agent runtime's node, the same in every local sandbox (shared/agent-runtime.ts) — or, in a
   * sandbox made by a build from before the runtime (none bound; still running across an upgrade),
   * `node` from its PATH, as its agent ran then.
   */
  readonly agentNode = `$([ -x ${agentRuntimeArgv()[0]} ] && echo '${agentRuntimeArgv().join(' ')}' || echo node)`;

  /** The stored templates this server can run (those `user` may use), read now. */
  templateNames(user?: string): string[] {
    try {
      return this.creator.templateNames(user);
    } catch {
      return [];
    }
  }

  /** Resolves once this instance's start-up sweep is done, with how many dead sandboxes it removed; never rejects. */
  sweptAtStart(): Promise<number> {
    return this.sweep;
  }

  async create(opts: CreateOpts): Promise<SandboxMetadata> {
    return asProviderErrors(() => this.creator.create(opts));
  }

  async list(opts: ListOpts): Promise<SandboxMetadata[]> {
    return asProviderErrors(() => this.lifecycle.list(opts));
  }

  async getInfo(sandboxId: string): Promise<SandboxMetadata> {
    return asProviderErrors(() => this.lifecycle.getInfo(sandboxId));
  }

  async lifetimeEnd(sandboxId: string): Promise<string | null> {
    return asProviderErrors(async () => new Date(await this.registry.lifetimeEndMs(sandboxId)).toISOString());
  }

  async setTimeout(sandboxId: string, timeoutS: number): Promise<void> {
    return asProviderErrors(() => this.lifecycle.setTimeout(sandboxId, timeoutS));
  }

  async kill(sandboxId: string): Promise<void> {
    this.failures.report(sandboxId);
    await asProviderErrors(() => this.lifecycle.kill(sandboxId));
    // After: a call in flight must learn that the sandbox ended, not that its channel was closed.
    this.residents.forget(sandboxId);
    this.failures.forget(sandboxId);
  }

  /** Notes on the limits the sandbox met ([] when none, or when it is gone: they only explain). */
  async limitNotes(sandboxId: string): Promise<string[]> {
    try {
      return limitNotes(await this.registry.require(sandboxId));
    } catch {
      return [];
    }
  }

  /** What the sandbox uses now, against the limits its keeper enforces. */
  async usage(sandboxId: string): Promise<SandboxUsage> {
    return asProviderErrors(async () => sandboxUsage(await this.registry.require(sandboxId)));
  }

  /** Notes on the requests the sandbox's egress proxy refused or could not get through in `window` ([] when none, or when it is gone). */
  async egressNotes(sandboxId: string, window: EgressWindow): Promise<string[]> {
    try {
      return await egressNotes(await this.registry.require(sandboxId), window.sinceMs, window.untilMs);
    } catch {
      return [];
    }
  }

  async getOwner(sandboxId: string): Promise<string | null> {
    return asProviderErrors(() => this.lifecycle.getOwner(sandboxId));
  }

  async getWorkspace(sandboxId: string): Promise<SandboxWorkspace | null> {
    return asProviderErrors(async () => {
      const sb = await this.registry.require(sandboxId);
      return sb.spec.workspace ? localWorkspace(sb.dir, sb.spec.workspace) : null;
    });
  }

  async imageWorkingDir(sandboxId: string): Promise<string | null> {
    return asProviderErrors(async () => {
      const { spec } = await this.registry.require(sandboxId);
      // The image's user: its home (or `/`), never root's (0700), where the image names no directory.
      return spec.user ? CommandRunner.userStartDir(spec, spec.user) : (spec.workingDir ?? null);
    });
  }

  async getEnvironment(sandboxId: string): Promise<Record<string, string>> {
    return asProviderErrors(() => this.lifecycle.getEnvironment(sandboxId));
  }

  async close(): Promise<void> {
    await this.sweep;
    this.residents.closeAll();
    this.registry.clear();
  }

  async exec(sandboxId: string, command: string, opts: ExecOpts): Promise<ExecResult> {
    try {
      return await asProviderErrors(() => this.commands.exec(sandboxId, command, opts));
    } finally {
      this.failures.report(sandboxId);
    }
  }

  async readFile(sandboxId: string, path: string, opts: ReadFileOpts = {}): Promise<ReadFileResult> {
    return asProviderErrors(() => this.files.readFile(sandboxId, path, opts));
  }

  async writeFile(sandboxId: string, path: string, data: Buffer, opts: WriteFileOpts = {}): Promise<{ size: number }> {
    return asProviderErrors(() => this.files.writeFile(sandboxId, path, data, opts));
  }

  async listFiles(sandboxId: string, path: string, opts: ListFilesOpts): Promise<FileEntry[]> {
    return asProviderErrors(() => this.files.listFiles(sandboxId, path, opts));
  }

  async execPromotable(sandboxId: string, command: string, opts: PromotableExecOpts): Promise<PromotableOutcome | null> {
    try {
      return await asProviderErrors(() => this.commands.execPromotable(sandboxId, command, opts));
    } finally {
      this.failures.report(sandboxId);
    }
  }

  /**
   * The sandbox's resident agent; a start through it gets the sandbox's environment under the
   * call's, and the task tier's bounds with the command's raised OOM score (as a supervisor gives it).
   */
  async agentChannel(sandboxId: string): Promise<AgentChannel | null> {
    return asProviderErrors(async () => {
      const sb = await this.registry.require(sandboxId);
      const channel = await this.residents.channel(sb);
      if (!channel) return null;
      // The image's user: a resident that takes `run_as` (minor 9) starts its tasks as it; an older
      // one would start them as root, so a per-call agent does (CommandRunner.commandEnv's RUN_AS_ENV).
      const user = sb.spec.user;
      if (user && !agentSupportsRunAs(channel.hello)) return null;
      const agent = asAgentChannel(channel, (request, callEnvs) => ({
        ...request,
        // A `command`'s environment: the user's HOME, USER and LOGNAME for the command itself (the resident's own stay).
        env: this.runner.commandEnv(sb, callEnvs, 'command'),
        ...(user ? { run_as: { uid: user.uid, gid: user.gid } } : {}),
        ...(sb.spec.limits ? { bounds: boundsFor(sb.spec.limits, 'task', COMMAND_OOM_SCORE_ADJ) } : {}),
      }));
      const processes = sb.spec.limits?.processes;
      return {
        ...agent,
        // A start with no room is refused as a command is (exec/resident-exec.ts): the sandbox's
        // limit with the same text as an entry the prelude refuses, and the server's user's limit
        // named where that is what the start met.
        async request(request, opts) {
          const response = await agent.request(request, opts);
          if (request.op !== 'start' || response.ok) return response;
          if (response.error.code === 'process_limit' && processes !== undefined) throw processLimitReached(processes, 'task');
          if (response.error.code === 'out_of_processes') throw commandOutOfProcesses('task');
          return response;
        },
      };
    });
  }

  async exposePort(sandboxId: string, port: number): Promise<ExposedPort> {
    return asProviderErrors(() => this.ports.expose(sandboxId, port));
  }

  async describeNetwork(sandboxId: string): Promise<NetworkDescription> {
    return asProviderErrors(() => describeSandboxNetwork(this.registry, sandboxId));
  }

  /** Saves a running template sandbox's files as template `name` (templates/snapshot.ts). */
  async snapshot(sandboxId: string, name: string, opts: SnapshotOpts = {}): Promise<SnapshotResult> {
    return asProviderErrors(async () => {
      const sb = await this.registry.require(sandboxId);
      const root = sb.spec.root;
      // Its workspace is copied in as files at /workspace: refused where the template has files there to merge with.
      if (sb.spec.workspace && root && templateHoldsWorkspace(root.layers)) throw workspaceSnapshotRefused();
      const { record, layerBytes, isFrozen } = await this.templates.snapshot(
        { id: sb.id, template: root ? specTemplate(sb.spec) : undefined, layerDirs: root?.layers },
        root ? liveWritableLayer(sb.dir) : null,
        name,
        this.maxSnapshotStorageBytes,
        opts.owner,
        { keepAptCache: opts.keepAptCache === true },
      );
      return {
        template: templateRef(record),
        sizeBytes: layerBytes,
        createdAt: record.created_at,
        note: localSnapshotNote(isFrozen, sb.spec.workspace !== undefined, opts.keepAptCache === true),
      };
    });
  }

  async stopProcesses(sandboxId: string): Promise<{ stopped: number }> {
    return asProviderErrors(async () => {
      const sb = await this.registry.require(sandboxId);
      return { stopped: await stopLeftovers(sb.keeper.pid1) };
    });
  }

  async openTerminal(sandboxId: string, opts: TerminalOpts): Promise<TerminalSession> {
    return asProviderErrors(() => this.terminals.open(sandboxId, opts));
  }
}

/**
 * The local templates of a configuration (the CLI's `template` commands): its templates directory,
 * with the sandboxes of its state directory as their users.
 */
export function createLocalTemplates(opts: LocalProviderOpts = {}): LocalTemplates {
  const settings = resolveSettings(opts);
  return new LocalTemplates(settings, new SandboxRegistry(settings));
}

/** Creates the local provider (bubblewrap sandboxes on this machine). */
export function createLocalProvider(opts?: LocalProviderOpts): Provider {
  return new LocalProvider(opts);
}
