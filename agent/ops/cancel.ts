// cancel: ask the task's verified supervisor to stop it (TERM, then KILL, to the group) and wait
// a bounded time for the supervisor to confirm a terminal state. Nothing is signalled unless it
// is verified by pid *and* /proc start time; a terminal task is left alone.
import type { TaskView } from '../../shared/protocol.js';
import type { TaskStatus } from '../../shared/status.js';
import { markCancelRequested } from '../owned-files.js';
import { hasLiveGroupMembers, isSameLiveProcess, readProcStat, signalGroup } from '../proc.js';
import { buildView, observeTask, type ObservedTask, type PageOpts } from '../task-view.js';
import { sleep, type Timings } from '../timing.js';
import { existingTaskDir } from './task-dir.js';

/** A validated cancel request. */
export interface CancelOpts extends PageOpts {
  taskId: string;
}

/** The tasks this process runs itself (the resident agent's): a cancel of one stops it in-process. */
export interface OwnedTasks {
  /**
   * Stops task `taskId` if this process runs it, resolving with its final status once it ended
   * (null if not within `waitMs`); undefined when this process does not run it.
   */
  cancel(taskId: string, waitMs: number): Promise<TaskStatus | null> | undefined;
}

/** Cancels a running task and returns the confirmed outcome, or `running`/`unknown` with an error saying why not. */
export async function cancelTask(opts: CancelOpts, timings: Timings, owned?: OwnedTasks): Promise<TaskView> {
  const dir = existingTaskDir(opts.taskId);
  const observed = observeTask(dir);
  if (observed.state === 'running') {
    const here = owned?.cancel(opts.taskId, timings.cancelConfirmMs);
    if (here) return buildView(opts.taskId, dir, await confirmOwned(dir, await here), opts);
    const status = observed.status!;
    // A task the resident runs (not yet adopted by a supervisor): its owner is another process.
    if (!status.supervisor && status.wrapper) return buildView(opts.taskId, dir, await stopWrappedTask(dir, status, timings), opts);
    return buildView(opts.taskId, dir, await stopViaSupervisor(dir, status, timings), opts);
  }
  if (observed.state === 'unknown' && observed.status?.state === 'running' && observed.status.group) {
    return buildView(opts.taskId, dir, await stopOrphanedGroup(observed, observed.status.group, timings), opts);
  }
  // Terminal (the saved outcome), or unknown with nothing verifiable to signal.
  return buildView(opts.taskId, dir, observed, opts);
}

async function stopViaSupervisor(dir: string, status: TaskStatus, timings: Timings): Promise<ObservedTask> {
  const sup = status.supervisor!;
  // Re-verified right before signalling: the supervisor may have finished meanwhile.
  if (isSameLiveProcess(sup.pid, sup.start_time)) {
    try {
      process.kill(sup.pid, 'SIGTERM');
    } catch {
      // it exited in between; the status below tells how
    }
  }
  const giveUpAtMs = Date.now() + timings.cancelConfirmMs;
  for (;;) {
    const observed = observeTask(dir);
    if (observed.state !== 'running') return observed;
    if (Date.now() >= giveUpAtMs) {
      return {
        ...observed,
        error: {
          code: 'cancel_unconfirmed',
          message: `cancellation was requested but not confirmed within ${timings.cancelConfirmMs} ms; query the task again`,
        },
      };
    }
    await sleep(Math.min(timings.pollMs, Math.max(1, giveUpAtMs - Date.now())));
  }
}

/** The outcome of a cancel this process carried out on a task it runs: its final status, or unconfirmed. */
async function confirmOwned(dir: string, final: TaskStatus | null): Promise<ObservedTask> {
  if (final) return { state: final.state, status: final, ...(final.error ? { error: final.error } : {}) };
  return {
    ...observeTask(dir),
    error: { code: 'cancel_unconfirmed', message: 'cancellation was requested but not confirmed in time; query the task again' },
  };
}

/**
 * A task the resident runs whose owner is another process (another server's resident, or none
 * between its resident and its adopter): whoever records its outcome is told it was cancelled
 * (a marker file), and its verified group gets TERM, then KILL after the grace period; the
 * confirmed outcome is awaited as for a supervised task.
 */
async function stopWrappedTask(dir: string, status: TaskStatus, timings: Timings): Promise<ObservedTask> {
  markCancelRequested(dir);
  const group = status.group;
  const leader = group ? readProcStat(group.pgid) : null;
  const isVerified = group !== null && leader !== null && leader.startTime === group.leader_start_time && leader.pgid === group.pgid;
  if (isVerified) {
    signalGroup(group.pgid, 'SIGTERM');
    signalGroup(group.pgid, 'SIGCONT');
  }
  const killAt = Date.now() + timings.graceMs;
  const until = Date.now() + timings.cancelConfirmMs;
  let isKilled = false;
  for (;;) {
    const observed = observeTask(dir);
    if (observed.state !== 'running') return observed;
    if (isVerified && !isKilled && Date.now() >= killAt && hasLiveGroupMembers(group.pgid)) {
      signalGroup(group.pgid, 'SIGKILL');
      isKilled = true;
    }
    if (Date.now() >= until) {
      return {
        ...observed,
        error: {
          code: 'cancel_unconfirmed',
          message: `cancellation was requested but not confirmed within ${timings.cancelConfirmMs} ms; query the task again`,
        },
      };
    }
    await sleep(Math.min(timings.pollMs, Math.max(1, until - Date.now())));
  }
}

/** The supervisor is gone but the group leader is verifiably the task's: stop the group ourselves. */
async function stopOrphanedGroup(
  observed: ObservedTask,
  group: { pgid: number; leader_start_time: number },
  timings: Timings,
): Promise<ObservedTask> {
  const leader = readProcStat(group.pgid);
  const isVerified = leader !== null && leader.state !== 'Z' && leader.startTime === group.leader_start_time && leader.pgid === group.pgid;
  if (!isVerified) return observed;
  signalGroup(group.pgid, 'SIGTERM');
  signalGroup(group.pgid, 'SIGCONT');
  // A pgid cannot be reused while any member lives, so the group stays the verified one while it exists.
  const giveUpAtMs = Date.now() + Math.min(timings.graceMs, timings.cancelConfirmMs);
  while (hasLiveGroupMembers(group.pgid) && Date.now() < giveUpAtMs) await sleep(timings.pollMs);
  if (hasLiveGroupMembers(group.pgid)) signalGroup(group.pgid, 'SIGKILL');
  return {
    state: 'unknown',
    status: observed.status,
    error: {
      code: 'supervisor_missing',
      message: 'the task supervisor is no longer running, so no outcome was recorded; its process group was sent TERM, then KILL',
    },
  };
}
