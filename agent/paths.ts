// Where task state lives: one private directory per sandbox OS user.
import { mkdirSync, chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { userInfo } from 'node:os';
import { AGENT_STATE_FROM_HOME } from '../shared/agent-state.js';
import { AgentFailure } from './errors.js';
import { isNoSpaceError, stateDirFull } from './no-space.js';

/** $HOME, else the user's home from the password database; null when neither exists. */
export function homeDir(env: NodeJS.ProcessEnv = process.env): string | null {
  if (env.HOME) return env.HOME;
  // Not os.homedir(): it returns an empty HOME as is, and a relative state path would follow.
  try {
    return userInfo().homedir || null;
  } catch {
    return null; // a uid without a passwd entry, as containers often run
  }
}

/** $SANDBOX_AGENT_STATE_DIR, else $HOME/.local/state/sandbox-agent; throws a clear failure without either. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.SANDBOX_AGENT_STATE_DIR;
  if (explicit) return explicit;
  const home = homeDir(env);
  if (home === null) {
    throw new AgentFailure(
      'internal',
      'no state directory: HOME is unset and this user has no home directory; set HOME or SANDBOX_AGENT_STATE_DIR',
    );
  }
  return join(home, AGENT_STATE_FROM_HOME);
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
  // As every start but a sandbox's first finds them: two stats, nothing to change.
  if (isOwnPrivateDir(root) && isOwnPrivateDir(tasks)) return tasks;
  try {
    mkdirSync(tasks, { recursive: true, mode: 0o700 });
    // mkdir's mode is filtered by the umask and ignored for existing directories.
    chmodSync(root, 0o700);
    chmodSync(tasks, 0o700);
  } catch (err) {
    if (isNoSpaceError(err)) throw stateDirFull();
    throw new AgentFailure(
      'internal',
      `the state directory cannot be created or made private (${(err as NodeJS.ErrnoException).code ?? 'error'}); set SANDBOX_AGENT_STATE_DIR (or HOME) to a writable place`,
    );
  }
  return tasks;
}

/** This process's uid (a node process never changes it), read once. */
let ownUid: number | undefined;

/** True when `path` is a directory of this process's user with mode 0700 (what ensureTasksDir makes of it). */
export function isOwnPrivateDir(path: string): boolean {
  try {
    const st = statSync(path, { throwIfNoEntry: false });
    return st !== undefined && st.isDirectory() && (st.mode & 0o777) === 0o700 && st.uid === (ownUid ??= process.getuid?.());
  } catch {
    return false;
  }
}

/** File names inside a task directory. */
export const TASK_FILES = {
  request: 'request.json',
  status: 'status.json',
  stdout: 'stdout.log',
  stderr: 'stderr.log',
  /** A capped stream's last bytes, masked: written (atomically) before the final status, only for a log that was capped. */
  stdoutTail: 'stdout.tail',
  stderrTail: 'stderr.tail',
  /** The FIFO the command reads as stdin while `input` may write to it (absent with `stdin: false`). */
  stdin: 'stdin.fifo',
  /** The same FIFO once `eof` closed it: kept under this name so `input` can say why it refuses. */
  stdinClosed: 'stdin.closed',
  /** Pre-allocated room for the final status on a full filesystem (see status-reserve.ts). */
  statusReserve: 'status.reserve',
} as const;
