// get: one page of each log plus the observed state; with wait_s > 0 it long-polls until there
// is output beyond the offsets, the state changes, or the wait ends.
import { LIMITS } from '../../shared/limits.js';
import type { TaskView } from '../../shared/protocol.js';
import { TASK_FILES } from '../paths.js';
import { buildView, logSizes, observeTask, refuseOffsetsPastEnd, type ObservedTask, type PageOpts } from '../task-view.js';
import type { Timings } from '../timing.js';
import { existingTaskDir } from './task-dir.js';
import { watchDirChanges } from '../dir-changes.js';

/** A validated get request. */
export interface GetOpts extends PageOpts {
  taskId: string;
  waitS: number;
}

/**
 * Returns the task view; waits up to waitS for new output or a state change while the task runs.
 * An offset past its log's end is refused at once (see refuseOffsetsPastEnd).
 */
export async function getTask(opts: GetOpts, timings: Timings): Promise<TaskView> {
  const dir = existingTaskDir(opts.taskId);
  // Before the wait: a waiting get on an offset past the end would only wait to skip output.
  refuseOffsetsPastEnd(dir, opts);
  let observed = observeTask(dir);
  if (opts.waitS > 0 && !isWorthReturning(dir, observed, opts)) {
    observed = await waitForChange(dir, opts, Date.now() + opts.waitS * 1000, timings.pollMs * 4);
  }
  return buildView(opts.taskId, dir, observed, opts);
}

function isWorthReturning(dir: string, observed: ObservedTask, opts: PageOpts): boolean {
  if (observed.state !== 'running') return true;
  const [out, err] = logSizes(dir);
  return out > opts.stdoutOffset || err > opts.stderrOffset;
}

async function waitForChange(dir: string, opts: PageOpts, giveUpAtMs: number, pollMs: number): Promise<ObservedTask> {
  // Log writes and the status rename both land in the task directory. Offsets at the logs' cap
  // read nothing (a resident waiting on a promotable exec): then only the status can matter.
  const isStatusOnly = opts.stdoutOffset >= LIMITS.streamCapBytes && opts.stderrOffset >= LIMITS.streamCapBytes;
  const changes = watchDirChanges(dir, isStatusOnly ? TASK_FILES.status : undefined);
  try {
    for (;;) {
      const left = giveUpAtMs - Date.now();
      if (left <= 0) return observeTask(dir);
      await changes.next(Math.min(pollMs, left));
      const observed = observeTask(dir);
      if (isWorthReturning(dir, observed, opts)) return observed;
    }
  } finally {
    changes.close();
  }
}
