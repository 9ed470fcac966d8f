// exec through a sandbox's resident agent: the command is spawned inside, by a process already in
// the sandbox's namespaces and cgroups (no nsenter, no cgroup move), with the environment, cwd and
// bounds of an entry of its role (limits/process-tiers.ts). Its answer is trusted no more than an
// exec's output: schema-checked, mapped here to the same errors the nsenter path gives.
import { ExecResultSchema, PROTOCOL_VERSION, type Bounds, type ExecFinished } from '../../../../shared/protocol.js';
import { ProviderError } from '../../provider-error.js';
import { RESIDENT_UNREACHABLE, type ResidentChannel, channelFailure } from '../../resident-channel.js';
import type { ExecResult, ExecRole, PromotableOutcome } from '../../provider.js';
import { definedFields } from '../../../util/defined-fields.js';
import { LOCAL_DETAILS } from '../errors.js';
import { COMMAND_OOM_SCORE_ADJ } from '../limits/entry-prelude.js';
import { LimitWatch } from '../limits/limit-watch.js';
import { processLimitReached } from '../limits/notes.js';
import { processLimitFor, refuseStartAt } from '../limits/process-tiers.js';
import type { SandboxLimits } from '../limits/sandbox-limits.js';
import { egressRefusalNotes } from '../network/denial-notes.js';
import { isStillAlive, type LiveSandbox } from '../sandbox/registry.js';

/** After the command's own timeout, how long its answer may take (the kill, the drain, a loaded machine). */
const ANSWER_SLACK_MS = 30_000;

/** One exec to run through the resident (arguments already validated). */
export interface ResidentExec {
  command: string;
  cwd: string | undefined;
  /** The command's whole environment. */
  env: Record<string, string>;
  timeoutS: number;
  maxOutputBytes: number;
  stdin: Buffer | undefined;
  signal: AbortSignal | undefined;
  role: ExecRole;
  promote?: { taskId: string; afterS: number };
}

/**
 * The bounds of a command of `role` in a sandbox bounded by `limits` (none for a sandbox from
 * before limits): its tier's process limit and refusal point, and for the caller's commands the
 * raised OOM score — as the entry prelude applies them to an nsenter entry.
 */
export function boundsFor(
  limits: SandboxLimits | undefined,
  role: ExecRole,
  oomScoreAdj = role === 'command' ? COMMAND_OOM_SCORE_ADJ : null,
): Bounds | undefined {
  if (!limits) return undefined;
  return {
    processes: processLimitFor(limits.processes, role),
    open_files: limits.openFiles,
    refuse_at: refuseStartAt(limits.processes, role),
    oom_score_adj: oomScoreAdj,
  };
}

/**
 * Runs `run` through `channel`: its result, the task it became (with `promote`), or
 * 'unreachable' when the resident never got it (the caller runs it the old way: nothing ran).
 */
export async function execThroughResident(
  sb: LiveSandbox,
  channel: ResidentChannel,
  run: ResidentExec,
): Promise<PromotableOutcome | 'unreachable'> {
  const notes = run.role === 'command' ? new LimitWatch(sb) : null;
  const startedMs = Date.now();
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
          cwd: run.cwd,
          stdin_b64: run.stdin?.toString('base64'),
          bounds: boundsFor(sb.spec.limits, run.role),
          promote: run.promote ? { task_id: run.promote.taskId, after_ms: run.promote.afterS * 1000 } : undefined,
        }),
      },
      { timeoutMs: run.timeoutS * 1000 + ANSWER_SLACK_MS, ...definedFields({ signal: run.signal }) },
    );
  } catch (e) {
    const failure = channelFailure(e);
    if (failure.code === RESIDENT_UNREACHABLE) return 'unreachable';
    if (!isStillAlive(sb)) throw new ProviderError('not_found', { detail: LOCAL_DETAILS.endedDuringCommand });
    throw failure;
  }
  if (!response.ok) throw refusal(sb, run.role, response.error.code);
  const parsed = ExecResultSchema.safeParse(response.result);
  if (!parsed.success || (parsed.data.kind === 'promoted' && !run.promote)) {
    throw new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent answered outside the protocol.' });
  }
  if (parsed.data.kind === 'promoted') return parsed.data;
  const r = parsed.data;
  if (r.exit_code !== 0 && !isStillAlive(sb)) throw new ProviderError('not_found', { detail: LOCAL_DETAILS.endedDuringCommand });
  const noted = r.exit_code !== 0 && notes ? [...(notes.notesSince() ?? []), ...egressRefusalNotes(sb.dir, startedMs)] : [];
  return { kind: 'finished', result: { ...execResult(r), ...definedFields({ notes: noted.length > 0 ? noted : undefined }) } };
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
  };
}

/** The resident's refusal as the error the nsenter path gives for the same thing. */
function refusal(sb: LiveSandbox, role: ExecRole, code: string): ProviderError {
  switch (code) {
    case 'cwd_not_found':
      // invalid_argument, as E2B's envd reports it: the call's argument is wrong, not the sandbox.
      return new ProviderError('invalid_argument', { code: 'cwd_not_found', detail: LOCAL_DETAILS.cwdMissing });
    case 'process_limit':
      return processLimitReached(sb.spec.limits?.processes ?? 0, role);
    case 'state_dir_full':
    case 'task_limit':
      return new ProviderError('insufficient_resources', { code });
    case 'invalid_request':
      return new ProviderError('invalid_argument', { code });
    default:
      return new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent failed to run the command.' });
  }
}
