// Entering a live sandbox to run one argv (setpriv + nsenter, into its cgroups and namespaces),
// with the process groups of running commands tracked per sandbox so that kill can end them.
import { join } from 'node:path';
import { ProviderError } from '../../../errors.js';
import { cancelledBeforeStart, SANDBOX_HOME } from '../../provider.js';
import { LOCAL_DETAILS } from '../errors.js';
import { buildEnterCommand, type Command } from '../launch/command-lines.js';
import { sandboxPath } from '../launch/environment.js';
import type { LiveSandbox } from '../sandbox/registry.js';
import { specNetwork } from '../sandbox/spec.js';
import type { LocalSettings } from '../settings.js';
import { CancelledError, captureCommand, killProcessGroup, SpawnFailedError, type CaptureResult } from './capture.js';

/** How one command runs inside a sandbox (see CaptureOpts). */
export interface SandboxRunOpts {
  env: Record<string, string>;
  envScript?: string;
  timeoutMs: number;
  maxOutputBytes: number;
  withMetaFd: boolean;
  keepTail?: boolean;
  stdin?: Buffer;
  signal?: AbortSignal;
}

/** Runs commands inside sandboxes and remembers which of them still run. */
export class CommandRunner {
  /** Process groups of this instance's running commands, per sandbox (ended by kill). */
  private readonly running = new Map<string, Set<number>>();

  constructor(private readonly settings: Pick<LocalSettings, 'nodeBinDirs' | 'shell' | 'drainGraceMs' | 'cover'>) {}

  /** The sandbox user's login environment (before the sandbox's and the call's own variables). */
  baseEnv(): Record<string, string> {
    return {
      HOME: SANDBOX_HOME,
      PATH: sandboxPath(this.settings.nodeBinDirs),
      LANG: 'C.UTF-8',
      USER: 'user',
      LOGNAME: 'user',
      SHELL: this.settings.shell,
    };
  }

  /** Ends the process groups of every command this instance still runs in `sandboxId`. */
  killCommands(sandboxId: string): void {
    for (const pgid of this.running.get(sandboxId) ?? []) killProcessGroup(pgid);
  }

  /**
   * Runs `argv` in the sandbox and captures it; a cancelled call or a failed spawn becomes a
   * ProviderError (conflict/cancelled, unavailable/nsenter_missing, insufficient_resources).
   */
  async run(sb: LiveSandbox, argv: string[], opts: SandboxRunOpts): Promise<CaptureResult> {
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
        drainGraceMs: this.settings.drainGraceMs,
        onSpawn: (p) => groups.add((pgid = p)),
        onExit: () => {
          if (pgid !== undefined) groups.delete(pgid);
        },
        ...(this.settings.cover ? { cover: this.settings.cover } : {}),
      });
    } catch (e) {
      if (e instanceof CancelledError) throw cancelledBeforeStart();
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
}
