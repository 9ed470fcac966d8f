// list: every task of this sandbox user, newest first, with the same state rules as `get` (a
// running status whose supervisor is gone reads `unknown`) but no output pages. Reads only files
// and /proc: no child_process or net, so it starts as fast as `get`.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LIMITS } from '../../shared/limits.js';
import { TASK_ID_PATTERN, type ListResult, type TaskSummary } from '../../shared/protocol.js';
import { TASK_FILES, tasksDir } from '../paths.js';
import { readTaskRequest } from '../task-request.js';
import { logSizes, observeTask } from '../task-view.js';

/** The tasks in the state directory (none if it does not exist yet), newest first, at most LIMITS.maxTasks. */
export function listTasks(): ListResult {
  const tasks = tasksDir();
  if (!existsSync(tasks)) return { tasks: [], truncated: false };
  const entries = readdirSync(tasks)
    .filter((name) => TASK_ID_PATTERN.test(name))
    .map((id) => summarize(id, join(tasks, id)));
  // Newest first, by when `start` created each task (milliseconds; started_at has only seconds).
  entries.sort((a, b) => b.sortKey - a.sortKey || (a.summary.task_id < b.summary.task_id ? -1 : 1));
  return { tasks: entries.slice(0, LIMITS.maxTasks).map((e) => e.summary), truncated: entries.length > LIMITS.maxTasks };
}

function summarize(taskId: string, dir: string): { summary: TaskSummary; sortKey: number } {
  const observed = observeTask(dir);
  const s = observed.status;
  const [stdoutSize, stderrSize] = logSizes(dir);
  const summary: TaskSummary = {
    task_id: taskId,
    state: observed.state,
    exit_code: s?.exit_code ?? null,
    started_at: s?.started_at ?? null,
    finished_at: s?.finished_at ?? null,
    stdout_size: stdoutSize,
    stderr_size: stderrSize,
    stdout_truncated: s?.stdout_truncated ?? false,
    stderr_truncated: s?.stderr_truncated ?? false,
  };
  if (observed.error) summary.error = observed.error;
  Object.assign(summary, commandOf(dir));
  return { summary, sortKey: createdAtMs(dir) };
}

/** When `start` wrote the request; the directory's own mtime (which moves with every status write) only without one. */
function createdAtMs(dir: string): number {
  for (const path of [join(dir, TASK_FILES.request), dir]) {
    try {
      return statSync(path).mtimeMs;
    } catch {
      // try the next
    }
  }
  return 0;
}

/** The task's command as its request holds it, cut to LIMITS.listCommandMaxChars; nothing when unreadable. */
function commandOf(dir: string): Pick<TaskSummary, 'command' | 'command_truncated'> {
  let command: unknown;
  try {
    command = readTaskRequest(dir).command;
  } catch {
    return {};
  }
  if (typeof command !== 'string') return {};
  const isTruncated = command.length > LIMITS.listCommandMaxChars;
  return { command: isTruncated ? command.slice(0, LIMITS.listCommandMaxChars) : command, command_truncated: isTruncated };
}
