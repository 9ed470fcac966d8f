// The resident agent's `exec` request as both providers send it (local: with the sandbox's whole
// environment and its role's bounds; e2b: over envd's own environment), and its answer as the
// provider contract's ExecResult. What a refusal means is each provider's to say.
import { ExecResultSchema, PROTOCOL_VERSION, type AgentErrorCode, type Bounds, type ExecFinished } from '../../shared/protocol.js';
import { definedFields } from '../util/defined-fields.js';
import { ProviderError } from './provider-error.js';
import type { ExecResult, PromotableOutcome } from './provider.js';
import { channelFailure, RESIDENT_UNREACHABLE, type ResidentChannel } from './resident-channel.js';

/** After the command's own timeout, how long its answer may take (the kill, the drain, a loaded machine). */
const ANSWER_SLACK_MS = 30_000;

/** One exec for the resident (arguments already validated). */
export interface ResidentExecRun {
  command: string;
  /** Absolute, or absent for the home. */
  cwd: string | undefined;
  /** The command's environment: the whole of it, or with `inheritEnv` what goes over the resident's own. */
  env: Record<string, string>;
  inheritEnv?: boolean;
  timeoutS: number;
  maxOutputBytes: number;
  stdin: Buffer | undefined;
  signal: AbortSignal | undefined;
  bounds?: Bounds | undefined;
  /** At the timeout or an abort: TERM first and KILL this much later (default: KILL at once). */
  killGraceMs?: number | undefined;
  /** Stop what the command left in its group once it exits (default: it goes on). */
  reapsGroup?: boolean | undefined;
  promote?: { taskId: string; afterS: number } | undefined;
  /** The ids the command runs as (an image's user; only to a resident of protocol minor 9: agentSupportsRunAs). */
  runAs?: { uid: number; gid: number } | undefined;
  /** The file the resident removes once the command has ended (only to a resident of protocol minor 10: agentRemovesFile). */
  removeFile?: string | undefined;
}

/** What the resident made of an exec: an outcome, a refusal (nothing ran), or 'unreachable' (it never got it). */
export type ResidentExecAnswer = PromotableOutcome | { kind: 'refused'; code: AgentErrorCode } | 'unreachable';

/** Sends `run`; throws ProviderError (agent_lost, agent_timeout) when it was sent and no answer came. */
export async function requestExec(channel: ResidentChannel, run: ResidentExecRun): Promise<ResidentExecAnswer> {
  let response;
  try {
    response = await channel.request(
      {
        protocol: PROTOCOL_VERSION,
        op: 'exec',
        command: run.command,
        env: run.env,
        timeout_ms: run.timeoutS * 1000,
        max_output_bytes: run.maxOutputBytes,
        ...definedFields({
          inherit_env: run.inheritEnv,
          cwd: run.cwd,
          stdin_b64: run.stdin?.toString('base64'),
          bounds: run.bounds,
          kill_grace_ms: run.killGraceMs,
          reap_group: run.reapsGroup,
          run_as: run.runAs ? { uid: run.runAs.uid, gid: run.runAs.gid } : undefined,
          promote: run.promote ? { task_id: run.promote.taskId, after_ms: run.promote.afterS * 1000 } : undefined,
          remove_file: run.removeFile,
        }),
      },
      { timeoutMs: run.timeoutS * 1000 + ANSWER_SLACK_MS, ...definedFields({ signal: run.signal }) },
    );
  } catch (e) {
    const failure = channelFailure(e);
    if (failure.code === RESIDENT_UNREACHABLE) return 'unreachable';
    throw failure;
  }
  if (!response.ok) return { kind: 'refused', code: response.error.code };
  const parsed = ExecResultSchema.safeParse(response.result);
  if (!parsed.success || (parsed.data.kind === 'promoted' && !run.promote)) {
    throw new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent answered outside the protocol.' });
  }
  return parsed.data.kind === 'promoted' ? parsed.data : { kind: 'finished', result: execResult(parsed.data) };
}

/** The resident's finished exec as the provider contract's ExecResult. */
function execResult(r: ExecFinished): ExecResult {
  return {
    exitCode: r.exit_code,
    stdout: Buffer.from(r.stdout_b64, 'base64'),
    stderr: Buffer.from(r.stderr_b64, 'base64'),
    stdoutTruncated: r.stdout_truncated,
    stderrTruncated: r.stderr_truncated,
    stdoutHeadBytes: r.stdout_head_bytes,
    stderrHeadBytes: r.stderr_head_bytes,
    timedOut: r.timed_out,
    ...(r.output_lost !== undefined ? { outputLost: r.output_lost } : {}),
  };
}

/**
 * The agent's `out_of_processes` (a spawn of the command or its supervisor failed with EAGAIN or
 * ENOMEM: nothing ran) where whose limit it met is not known: the sandbox's user, the machine.
 */
export function outOfProcessesError(): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'out_of_processes',
    detail:
      'The command was not run: no process could be started for it (out of processes or memory: a process limit of the user the sandbox runs as, or of the machine). ' +
      'End what runs in this or other sandboxes (stop_processes, cancel_task, kill_sandbox), and retry.',
  });
}
