// Commands on a connected sandbox: exec under the watchdog wrapper (exec-script.ts), which owns the
// timeout and the group kill, with the cancel watcher behind an AbortSignal; and short helper
// scripts for other modules. Failures are the SDK's own errors, unmapped, or ProviderErrors of our
// own; the provider maps them.
import { CommandExitError, type CommandHandle, type Sandbox } from 'e2b';
import { ProviderError } from '../provider-error.js';
import { definedFields } from '../../util/defined-fields.js';
import { OutputCapture } from '../output-capture.js';
import { cancelledBeforeStart, DEFAULT_EXEC_OUTPUT_CAP_BYTES, resolveSandboxPath, type ExecOpts, type ExecResult } from '../provider.js';
import { watchCancel } from './cancel-watcher.js';
import { buildExecScript, EXEC_COMMAND_VAR, TIMED_OUT_EXIT } from './exec-script.js';

/** Timing of a command's end. */
export interface CommandsOpts {
  /** Seconds between TERM and KILL of a timed-out or cancelled command's process group. */
  killGraceS?: number;
  /**
   * After a cancelled exec's group has had its grace period, how long more to wait for the wrapper
   * to report before giving up on it (SIGKILL to the wrapper, exit code unknown).
   */
  cancelSettleMs?: number;
}

/** exec on a sandbox already connected. */
export interface Commands {
  /** Runs `command` by ExecOpts' contract; throws cancelledBeforeStart if the signal aborted before it started. */
  exec(sandbox: Sandbox, command: string, opts: ExecOpts): Promise<ExecResult>;
}

/** Seconds between TERM and KILL of a timed-out or cancelled command's group unless configured. */
export const DEFAULT_KILL_GRACE_S = 2;
const DEFAULT_CANCEL_SETTLE_MS = 5000;
// Linux caps one argv or environment string at 128 KiB; the command is one of each.
const MAX_COMMAND_BYTES = 120 * 1024;
// envd's own deadline for exec is a backstop behind the wrapper's watchdog.
const ENVD_BACKSTOP_S = 15;
const HELPER_TIMEOUT_MS = 60_000;
// A wrapper that exits TIMED_OUT_EXIT this early did not time out: the command chose that status.
const TIMED_OUT_SLACK_MS = 250;

/** Throws what exec refuses before any call is made: a command too long for one argument, a signal already aborted. */
export function checkExecCanStart(command: string, signal: AbortSignal | undefined): void {
  if (Buffer.byteLength(command) > MAX_COMMAND_BYTES) {
    throw new ProviderError('invalid_argument', {
      code: 'CommandTooLong',
      detail: 'The command is too long for one process argument (about 120 KiB); put it in a file.',
    });
  }
  if (signal?.aborted) throw cancelledBeforeStart();
}

/** The command's exit code; a nonzero one arrives as CommandExitError. */
async function exitOf(handle: CommandHandle): Promise<number> {
  try {
    return (await handle.wait()).exitCode;
  } catch (e) {
    if (e instanceof CommandExitError) return e.exitCode;
    throw e;
  }
}

/**
 * Runs a short helper `script` (bash -c) with `envs` and returns its stdout. A nonzero exit is
 * `not_found` when its stderr says a path is missing, else `internal` (code ShellHelperFailed).
 */
export async function runHelperScript(sandbox: Sandbox, script: string, envs: Record<string, string>): Promise<string> {
  try {
    return (await sandbox.commands.run(script, { envs, timeoutMs: HELPER_TIMEOUT_MS })).stdout;
  } catch (e) {
    if (e instanceof CommandExitError) {
      throw new ProviderError(/No such file|not found/i.test(e.stderr) ? 'not_found' : 'internal', { code: 'ShellHelperFailed' });
    }
    throw e;
  }
}

/** exec with the given timing. */
export function createCommands(opts: CommandsOpts = {}): Commands {
  const killGraceS = opts.killGraceS ?? DEFAULT_KILL_GRACE_S;
  const cancelSettleMs = opts.cancelSettleMs ?? DEFAULT_CANCEL_SETTLE_MS;
  const cancelTiming = { giveUpAfterMs: killGraceS * 1000 + cancelSettleMs, signalTimeoutMs: cancelSettleMs };

  /** Starts the wrapper in the background, its output going into the two captures. */
  function startWrapper(
    sandbox: Sandbox,
    command: string,
    o: ExecOpts,
    stdout: OutputCapture,
    stderr: OutputCapture,
  ): Promise<CommandHandle> {
    // The SDK hands output over decoded as UTF-8; it is re-encoded here for the byte caps.
    return sandbox.commands.run(buildExecScript(o.timeoutS, killGraceS), {
      background: true,
      stdin: o.stdin !== undefined,
      ...definedFields({ cwd: o.cwd !== undefined ? resolveSandboxPath(o.cwd) : undefined }),
      envs: { ...(o.envs ?? {}), [EXEC_COMMAND_VAR]: command },
      timeoutMs: (o.timeoutS + killGraceS + ENVD_BACKSTOP_S) * 1000,
      onStdout: (s: string) => stdout.push(Buffer.from(s, 'utf8')),
      onStderr: (s: string) => stderr.push(Buffer.from(s, 'utf8')),
    });
  }

  /** Feeds stdin (if any) and waits for the wrapper's exit code, or GAVE_UP_EXIT once a cancel gave up. */
  async function awaitExit(sandbox: Sandbox, handle: CommandHandle, o: ExecOpts): Promise<number> {
    const cancel = o.signal ? watchCancel(sandbox, handle, o.signal, cancelTiming) : undefined;
    try {
      if (o.stdin !== undefined) {
        if (o.stdin.length > 0) await handle.sendStdin(new Uint8Array(o.stdin));
        await handle.closeStdin();
      }
      return await Promise.race([exitOf(handle), ...(cancel ? [cancel.gaveUp] : [])]);
    } catch (e) {
      // Cancelled while feeding stdin (the wrapper may be gone): report the outcome, not the failure.
      if (cancel?.isRequested) return await Promise.race([exitOf(handle), cancel.gaveUp]);
      await handle.kill().catch(() => false);
      throw e;
    } finally {
      cancel?.dispose();
    }
  }

  return {
    async exec(sandbox, command, o) {
      // Connecting may have taken a while: a call cancelled meanwhile still starts nothing.
      checkExecCanStart(command, o.signal);
      const cap = o.maxOutputBytes ?? DEFAULT_EXEC_OUTPUT_CAP_BYTES;
      const stdout = new OutputCapture(cap);
      const stderr = new OutputCapture(cap);
      const startedMs = Date.now();
      const handle = await startWrapper(sandbox, command, o, stdout, stderr);
      const exitCode = await awaitExit(sandbox, handle, o);
      const timedOut = exitCode === TIMED_OUT_EXIT && Date.now() - startedMs >= o.timeoutS * 1000 - TIMED_OUT_SLACK_MS;
      return {
        exitCode: exitCode < 0 ? null : exitCode,
        stdout: stdout.data,
        stderr: stderr.data,
        stdoutTruncated: stdout.isTruncated,
        stderrTruncated: stderr.isTruncated,
        stdoutHeadBytes: stdout.splitAt,
        stderrHeadBytes: stderr.splitAt,
        timedOut,
      };
    },
  };
}
