import { existsSync } from 'node:fs';
import { AgentFailure } from '../errors.js';
import { taskDir } from '../paths.js';

/** The directory of an existing task; `not_found` when this sandbox user has no such task. */
export function existingTaskDir(taskId: string): string {
  const dir = taskDir(taskId);
  if (!existsSync(dir)) {
    throw new AgentFailure('not_found', 'no task with this task_id exists for this sandbox user (or the sandbox was recreated)');
  }
  return dir;
}
