// cancel: ask the task's verified supervisor to stop it (TERM, then KILL, to the group) and wait
// a bounded time for the supervisor to confirm a terminal state. Nothing is signalled unless it
// is verified by pid *and* /proc start time; a terminal task is left alone.
import type { TaskView } from '../../shared/protocol.js';
import type { TaskStatus } from '../../shared/status.js';
import { hasLiveGroupMembers, isSameLiveProcess, readProcStat, signalGroup } from '../proc.js';
import { buildView, observeTask, refuseOffsetsPastEnd, type ObservedTask, type PageOpts } from '../task-view.js';
import { sleep, type Timings } from '../timing.js';
import { existingTaskDir } from './task-dir.js';
import { markAsked } from '../cancel-mark.js';

/** A validated cancel request. */
export interface CancelOpts extends PageOpts {
  taskId: string;
}

/** The resident agent, told of each cancel of a running task: it keeps a promotable exec's task whose id someone else knew. */
export interface CancelWatcher {
  noteCancel(taskId: string): void;
}

/** Cancels a running task and returns the confirmed outcome, or `running`/`unknown` with an error saying why not. */
export async function cancelTask(opts: CancelOpts, timings: Timings, watcher?: CancelWatcher): Promise<TaskView> {
  const dir = existingTaskDir(opts.taskId);
  // Before any signal: a request refused for its offsets stops nothing.
  refuseOffsetsPastEnd(dir, opts);
  const observed = observeTask(dir);
  if (observed.state === 'running') {
    watcher?.noteCancel(opts.taskId);
    const status = observed.status!;
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
    // Before the signal: a reused supervisor acts on it only for the task marked (cancel-mark.ts).
    markAsked(dir, 'cancel');
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
