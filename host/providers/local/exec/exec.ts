// exec: one shell command in a sandbox, as its user, with the sandbox's environment (its proxy
// variables included) and the call's sourced inside (never given to the host-side nsenter), an
// optional cwd, a timeout and capped output. Through the sandbox's resident agent when it has one
// (resident-exec.ts: no process start on the host, no cgroup move), else entered with nsenter.
import { agentRemovesFile, agentSupportsRunAs } from '../../../../shared/protocol.js';
import { ProviderError } from '../../provider-error.js';
import { definedFields } from '../../../util/defined-fields.js';
import {
  cancelledBeforeStart,
  DEFAULT_EXEC_OUTPUT_CAP_BYTES,
  resolveSandboxPath,
  withFileRemoval,
  type ExecOpts,
  type ExecResult,
} from '../../provider.js';
import { LOCAL_DETAILS } from '../errors.js';
import { CHDIR_SCRIPT, envPrelude, exportScript } from '../launch/environment.js';
import { LimitWatch } from '../limits/limit-watch.js';
import { isStillAlive, type LiveSandbox, type SandboxRegistry } from '../sandbox/registry.js';
import type { ResidentChannel } from '../../resident-channel.js';
import { invalid, isNonNegativeInt, validateEnvs } from '../validation.js';
import { CommandRunner } from './command-runner.js';
import { execThroughResident } from './resident-exec.js';
import type { ResidentLinks } from './resident-link.js';
import type { PromotableExecOpts, PromotableOutcome } from '../../provider.js';

/** The exec operation of the local provider. */
export class SandboxExec {
  constructor(
    private readonly registry: SandboxRegistry,
    private readonly runner: CommandRunner,
    private readonly residents: ResidentLinks,
  ) {}

  /** Runs `command` with the sandbox's shell; throws (not yet mapped) for bad arguments or a gone sandbox. */
  async exec(sandboxId: string, command: string, opts: ExecOpts): Promise<ExecResult> {
    const outcome = await this.run(sandboxId, command, opts);
    if (outcome.kind !== 'finished') throw new ProviderError('internal');
    return outcome.result;
  }

  /** exec that goes on as a task if still running at `promote.afterS`; null when the sandbox has no resident that can. */
  async execPromotable(sandboxId: string, command: string, opts: PromotableExecOpts): Promise<PromotableOutcome | null> {
    const sb = await this.registry.require(sandboxId);
    const channel = await this.residents.channel(sb);
    if (!channel?.hello.promotable || !channel.supports('exec')) return null;
    try {
      return await this.run(sandboxId, command, opts, { promote: opts.promote, sb, channel });
    } catch (e) {
      // The resident went away before it got the command: nothing ran, the caller runs it as a task.
      if (e instanceof ProviderError && e.code === 'resident_unreachable') return null;
      throw e;
    }
  }

  /** `promotable`: the promotion, with the sandbox and channel execPromotable looked up already (each lookup reads /proc and the deadline). */
  private async run(
    sandboxId: string,
    command: string,
    opts: ExecOpts,
    promotable?: { promote: PromotableExecOpts['promote']; sb: LiveSandbox; channel: ResidentChannel },
  ): Promise<PromotableOutcome> {
    if (typeof command !== 'string' || command.includes('\0')) throw invalid('command must be a string without NUL bytes.');
    if (typeof opts.timeoutS !== 'number' || !(opts.timeoutS > 0)) throw invalid('timeout must be a positive number of seconds.');
    const maxOutputBytes = opts.maxOutputBytes ?? DEFAULT_EXEC_OUTPUT_CAP_BYTES;
    if (!isNonNegativeInt(maxOutputBytes)) throw invalid('maxOutputBytes must be an integer of at least 0.');
    const callEnvs = validateEnvs(opts.envs, 'envs');
    const callCwd = opts.cwd !== undefined ? resolveSandboxPath(opts.cwd) : undefined;
    if (opts.signal?.aborted) throw cancelledBeforeStart();
    const sb = promotable?.sb ?? (await this.registry.require(sandboxId));
    const role = opts.role ?? 'command';
    // The image's user: its commands run as its ids, and where no cwd is named, not in root's home (0700).
    const user = this.runner.commandUser(sb.spec, role);
    const cwd = callCwd ?? (user ? CommandRunner.userStartDir(sb.spec, user) : undefined);
    const channel = promotable?.channel ?? (await this.residents.channel(sb));
    const promote = promotable?.promote;
    // The image's user: a resident that takes `run_as` (minor 9) spawns the command as its ids; an
    // older one would run it as root, so the entry helper drops to them instead.
    if (channel?.supports('exec') && (!user || agentSupportsRunAs(channel.hello))) {
      // run_code's program: a resident of minor 10 removes it once the command ends; an older one runs the command that removes it itself.
      const run = withFileRemoval(command, opts, agentRemovesFile(channel.hello));
      const outcome = await execThroughResident(sb, channel, {
        command: run.command,
        cwd,
        env: this.runner.commandEnv(sb, callEnvs, role),
        timeoutS: opts.timeoutS,
        maxOutputBytes,
        stdin: opts.stdin,
        signal: opts.signal,
        role,
        ...definedFields({ promote, runAs: user ? { uid: user.uid, gid: user.gid } : undefined, removeFile: run.removeFile }),
      });
      if (outcome !== 'unreachable') return outcome;
    }
    if (promote) throw new ProviderError('unavailable', { code: 'resident_unreachable' });
    // No agent runs it: the command removes run_code's program itself.
    const entered = withFileRemoval(command, opts, false).command;
    const argv = (prelude: string): string[] => {
      const inner = [sb.spec.shell, '-c', envPrelude(sb.spec.shell, prelude), sb.spec.shell, entered];
      return cwd !== undefined ? ['/bin/sh', '-c', CHDIR_SCRIPT, 'sh', cwd, ...inner] : inner;
    };
    const notes = role === 'command' ? new LimitWatch(sb) : null;
    const r = await this.runner.run(sb, argv, {
      role,
      // Only this fixed environment exists outside the sandbox; the caller's is sourced inside.
      env: { PATH: this.runner.pathOf(sb.spec) },
      envScript: exportScript(this.runner.commandEnv(sb, callEnvs, role)),
      timeoutMs: opts.timeoutS * 1000,
      maxOutputBytes,
      keepTail: true,
      withMetaFd: cwd !== undefined,
      ...definedFields({ stdin: opts.stdin, signal: opts.signal }),
    });
    if (r.exitCode !== 0 && !isStillAlive(sb)) throw new ProviderError('not_found', { detail: LOCAL_DETAILS.endedDuringCommand });
    if (cwd !== undefined && r.exitCode === 1 && !r.timedOut && r.meta.toString() !== '.') {
      // invalid_argument, as E2B's envd reports it: the call's argument is wrong, not the sandbox.
      throw new ProviderError('invalid_argument', { code: 'cwd_not_found', detail: LOCAL_DETAILS.cwdMissing });
    }
    const result: ExecResult = {
      ...definedFields({ notes: r.exitCode !== 0 && notes ? notes.notesSince() : undefined }),
      exitCode: r.exitCode,
      stdout: r.stdout,
      stderr: r.stderr,
      stdoutTruncated: r.stdoutTruncated,
      stderrTruncated: r.stderrTruncated,
      stdoutHeadBytes: r.stdoutHeadBytes,
      stderrHeadBytes: r.stderrHeadBytes,
      timedOut: r.timedOut,
    };
    return { kind: 'finished', result };
  }
}
