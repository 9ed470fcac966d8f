// request.json: what `start` leaves in a task directory for its supervisor (the environment
// travels by inheritance, or in a warm supervisor's hand-over: warm-supervisor.ts). Read by the
// supervisor once, and by `input` to tell why a task has no stdin pipe.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JobBounds } from '../shared/job-bounds.js';
import type { RunAs } from './run-as.js';
import { TASK_FILES } from './paths.js';

/** The task request as written by `start`; fields marked optional are absent from older agents' files. */
export interface TaskRequestFile {
  task_id: string;
  command: string;
  cwd: string;
  timeout_s: number;
  grace_ms: number;
  drain_ms: number;
  poll_ms: number;
  /** true: the command reads a held-open pipe that `input` feeds; false or absent: /dev/null. */
  stdin?: boolean;
  /** Rlimits and OOM score the command applies first (a start through the resident; absent: none). */
  bounds?: JobBounds;
  /**
   * false: what the command leaves running in its group when it exits goes on, as `cmd &` in a
   * run_command expects (a promotable exec's task); absent or true: it is stopped, as for every task.
   * A timeout or cancel stops the whole group either way.
   */
  reap_group?: boolean;
  /** The ids the command runs as (run-as.ts; an image's user); absent: the supervisor's. */
  run_as?: RunAs;
  /** The request's `remove_file` (run_code's program): unlinked once the command has ended, before the final status. */
  remove_file?: string;
}

/** Reads the task's request file; throws if it is missing or not JSON. */
export function readTaskRequest(dir: string): TaskRequestFile {
  return JSON.parse(readFileSync(join(dir, TASK_FILES.request), 'utf8')) as TaskRequestFile;
}
