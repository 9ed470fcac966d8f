// exec through a sandbox's resident agent: the command is spawned inside, by a process already in
// the sandbox's namespaces and cgroups (no nsenter, no cgroup move), with the environment, cwd and
// bounds of an entry of its role (limits/process-tiers.ts). Its answer is trusted no more than an
// exec's output: schema-checked, mapped here to the same errors the nsenter path gives.
import type { Bounds } from '../../../../shared/protocol.js';
import { ProviderError } from '../../provider-error.js';
import type { ResidentChannel } from '../../resident-channel.js';
import { outOfProcessesError, requestExec, type ResidentExecRun } from '../../resident-exec.js';
import type { ExecRole, PromotableOutcome } from '../../provider.js';
import { definedFields } from '../../../util/defined-fields.js';
import { LOCAL_DETAILS, userProcessLimitIfShort } from '../errors.js';
import { COMMAND_OOM_SCORE_ADJ } from '../limits/entry-prelude.js';
import { LimitWatch } from '../limits/limit-watch.js';
import { processLimitReached } from '../limits/notes.js';
import { cleanupFrom, cleanupLimitFor, processLimitFor, refuseStartAt } from '../limits/process-tiers.js';
import type { SandboxLimits } from '../limits/sandbox-limits.js';
import { isStillAlive, type LiveSandbox } from '../sandbox/registry.js';

/** One local exec through the resident: the common request and whose processes these are. */
export interface ResidentExec extends Omit<ResidentExecRun, 'bounds' | 'inheritEnv'> {
  role: ExecRole;
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
    // As the entry prelude: a command that finds the sandbox at the commands' share runs on the reserve for cleaning up.
    ...(role === 'command' ? { cleanup: { from: cleanupFrom(limits.processes), processes: cleanupLimitFor(limits.processes) } } : {}),
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
  let answer;
  try {
    answer = await requestExec(channel, { ...run, bounds: boundsFor(sb.spec.limits, run.role) });
  } catch (e) {
    // The keeper marks the sandbox as ending before the resident is killed (isStillAlive).
    if (!isStillAlive(sb)) throw new ProviderError('not_found', { detail: LOCAL_DETAILS.endedDuringCommand });
    throw e;
  }
  if (answer === 'unreachable' || answer.kind === 'promoted') return answer;
  if (answer.kind === 'refused') throw refusal(sb, run.role, answer.code);
  const r = answer.result;
  if (r.exitCode !== 0 && !isStillAlive(sb)) throw new ProviderError('not_found', { detail: LOCAL_DETAILS.endedDuringCommand });
  return { kind: 'finished', result: { ...r, ...definedFields({ notes: r.exitCode !== 0 && notes ? notes.notesSince() : undefined }) } };
}

/** The resident's refusal as the error the nsenter path gives for the same thing. */
function refusal(sb: LiveSandbox, role: ExecRole, code: string): ProviderError {
  switch (code) {
    case 'cwd_not_found':
      // invalid_argument, as E2B's envd reports it: the call's argument is wrong, not the sandbox.
      return new ProviderError('invalid_argument', { code: 'cwd_not_found', detail: LOCAL_DETAILS.cwdMissing });
    case 'process_limit':
      return processLimitReached(sb.spec.limits?.processes ?? 0, role);
    case 'out_of_processes':
      return commandOutOfProcesses('command');
    case 'state_dir_full':
    case 'task_limit':
      return new ProviderError('insufficient_resources', { code });
    case 'invalid_request':
      return new ProviderError('invalid_argument', { code });
    default:
      return new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent failed to run the command.' });
  }
}

/**
 * A command or task the resident could not start for want of processes or memory: the server's
 * user's process limit, named, where that user has too few left below it (every sandbox process
 * counts against it for a server that is not root), else the agent's word as it is.
 */
export function commandOutOfProcesses(what: 'command' | 'task'): ProviderError {
  return userProcessLimitIfShort(`the ${what} could not be started (nothing ran)`) ?? outOfProcessesError();
}
