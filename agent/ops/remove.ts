// remove: delete a finished task's directory, freeing its slot of LIMITS.maxTasks. The host
// removes tasks it ran for a call that finished in time (their ids were never handed out); a
// running or unknown task is never removed, since only its directory lets anyone cancel it.
import { readdirSync, readlinkSync, renameSync, rmdirSync, rmSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { TERMINAL_STATES, type RemoveResult } from '../../shared/protocol.js';
import { AgentFailure } from '../errors.js';
import { isSameLiveProcess } from '../proc.js';
import { observeTask } from '../task-view.js';
import { sleep, type Timings } from '../timing.js';
import { existingTaskDir } from './task-dir.js';
import { supervisorGoneWithin, type SupervisorWatch } from './start.js';

/**
 * Removes the task's directory if its state is terminal; `task_not_finished` otherwise. `ended`:
 * the caller read the task's final status itself (it never changes) and watches the supervisor it
 * launched, so neither is looked up again.
 */
export async function removeTask(taskId: string, timings: Timings, ended?: { supervisor: SupervisorWatch }): Promise<RemoveResult> {
  const dir = existingTaskDir(taskId);
  if (ended) await supervisorGoneWithin(ended.supervisor, timings.inputWaitMs);
  else {
    const observed = observeTask(dir);
    if (!TERMINAL_STATES.has(observed.state)) {
      throw new AgentFailure(
        'task_not_finished',
        observed.state === 'running'
          ? 'the task is still running: cancel it first'
          : 'the task is unknown (its processes may still run): it cannot be removed; destroying the sandbox removes it',
      );
    }
    await awaitSupervisorExit(dir, observed.status?.supervisor ?? null, timings);
  }
  // A rename first: from here on the task is gone for every reader, even if deleting takes a while.
  // Any suffix unlikely to be taken does (a name taken makes the rename fail: nothing removed).
  const doomed = join(dirname(dir), `.removed-${taskId}-${Math.random().toString(16).slice(2, 10)}`);
  try {
    renameSync(dir, doomed);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new AgentFailure('not_found', 'the task was removed meanwhile');
    throw err;
  }
  deleteTaskDir(doomed);
  return { task_id: taskId, removed: true };
}

/**
 * Deletes a task's directory, renamed out of the way: its files (no subdirectory is ever made
 * there) unlinked by name from one listing, then the directory; anything else (a directory made in
 * it, a failure) goes to rmSync's recursive walk. That walk first tries rmdir, then lstats every
 * entry before it unlinks it: twice the system calls of a call's task removal.
 */
function deleteTaskDir(dir: string): void {
  try {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.isDirectory()) throw new Error('a directory in a task directory');
      unlinkSync(join(dir, entry.name));
    }
    rmdirSync(dir);
  } catch {
    rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  }
}

/**
 * The supervisor writes the final status and then tidies its stdin FIFO and exits, or, reused
 * (warm-supervisor.ts), leaves the task's directory for `/`: give it a moment (bounded) so its
 * last unlinks do not race the deletion.
 */
async function awaitSupervisorExit(dir: string, supervisor: { pid: number; start_time: number } | null, timings: Timings): Promise<void> {
  if (!supervisor) return;
  const giveUpAtMs = Date.now() + timings.inputWaitMs;
  const isInTask = (): boolean => isSameLiveProcess(supervisor.pid, supervisor.start_time) && cwdOf(supervisor.pid) === dir;
  while (isInTask() && Date.now() < giveUpAtMs) await sleep(Math.min(10, timings.pollMs));
}

/** A process's working directory; null when it cannot be read (gone, or another user's). */
function cwdOf(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return null;
  }
}
