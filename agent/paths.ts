// Where task state lives: one private directory per sandbox OS user.
import { mkdirSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { homedir } from 'node:os';

/** $SANDBOX_AGENT_STATE_DIR, else $HOME/.local/state/sandbox-agent. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.SANDBOX_AGENT_STATE_DIR;
  if (explicit) return explicit;
  return join(env.HOME || homedir(), '.local', 'state', 'sandbox-agent');
}

/** The folder holding one directory per task. */
export function tasksDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(stateDir(env), 'tasks');
}

/** The directory of one task (not created). */
export function taskDir(taskId: string, env: NodeJS.ProcessEnv = process.env): string {
  return join(tasksDir(env), taskId);
}

/** Creates the state and tasks directories if needed and makes sure both are private (0700). */
export function ensureTasksDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = stateDir(env);
  const tasks = tasksDir(env);
  mkdirSync(tasks, { recursive: true, mode: 0o700 });
  // mkdir's mode is filtered by the umask and ignored for existing directories.
  chmodSync(root, 0o700);
  chmodSync(tasks, 0o700);
  return tasks;
}

/** File names inside a task directory. */
export const TASK_FILES = {
  request: 'request.json',
  status: 'status.json',
  stdout: 'stdout.log',
  stderr: 'stderr.log',
} as const;
