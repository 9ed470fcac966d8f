// start: create the task directory exclusively, launch a detached supervisor, and report what it
// observed shortly afterwards. The exclusive mkdir is what makes "same task_id twice runs once"
// hold even for concurrent starts.
import { existsSync, mkdirSync, openSync, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { LIMITS } from '../../shared/limits.js';
import { TERMINAL_STATES, type TaskView } from '../../shared/protocol.js';
import { STATUS_FORMAT_VERSION } from '../../shared/status.js';
import { AgentFailure } from '../errors.js';
import { isNoSpaceError, stateDirFull } from '../no-space.js';
import { ensureTasksDir, homeDir, TASK_FILES } from '../paths.js';
import { writeFileAtomic, writeStatus } from '../status-file.js';
import { readStatus } from '../status-read.js';
import type { JobBounds } from '../../shared/job-bounds.js';
import type { TaskRequestFile } from '../task-request.js';
import { buildView, observeTask } from '../task-view.js';
import { sleep, type Timings } from '../timing.js';
import { childProcess } from '../node-modules.js';
import { closeInheritedFds } from '../inherited-fds.js';

/** A validated start request. */
export interface StartOpts {
  taskId: string;
  command: string;
  cwd?: string;
  timeoutS: number;
  /** Whether the command gets a held-open stdin pipe (else /dev/null). */
  stdin: boolean;
  /** The supervisor's (and so the command's) environment; default: this agent's own. */
  env?: NodeJS.ProcessEnv;
  /** Rlimits and OOM score the command applies first (a start through the resident). */
  bounds?: JobBounds;
}

/**
 * Runs a freshly claimed task some other way than a supervisor from the start (the resident runs
 * it itself; see resident-tasks.ts): resolves true once it has reported, false when it cannot
 * (the classic launch follows).
 */
export type TaskRunner = (dir: string, request: TaskRequestFile) => Promise<boolean>;

const START_POLL_MS = 10;

/** Starts the task unless its directory exists; either way returns the task's observed view (page 0). */
export async function startTask(opts: StartOpts, timings: Timings, runner?: TaskRunner): Promise<TaskView> {
  const tasks = ensureTasksDir();
  const dir = join(tasks, opts.taskId);
  let isNew = false;
  if (!existsSync(dir)) {
    const cwd = resolveCwd(opts.cwd);
    if (countTasks(tasks) >= LIMITS.maxTasks) throw taskLimit();
    try {
      mkdirSync(dir, { mode: 0o700 });
      isNew = true;
    } catch (err) {
      if (isNoSpaceError(err)) throw stateDirFull();
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (isNew) {
      // Two starts racing for the last slots may both get here; one more count keeps the bound.
      if (countTasks(tasks) > LIMITS.maxTasks) {
        rmdirSync(dir);
        throw taskLimit();
      }
      await launch(dir, opts, cwd, timings, runner);
    }
  }
  // An existing task (or one a concurrent start just created) is reported, never started again.
  // A directory that is still young may belong to a start in progress: give it time to report.
  if (!isNew) await waitForStatus(dir, timings.startReportMs - ageMs(dir), () => false);
  return buildView(opts.taskId, dir, observeTask(dir), { stdoutOffset: 0, stderrOffset: 0, limit: LIMITS.pageDefaultBytes });
}

async function launch(dir: string, opts: StartOpts, cwd: string, timings: Timings, runner?: TaskRunner): Promise<void> {
  const request: TaskRequestFile = {
    task_id: opts.taskId,
    command: opts.command,
    cwd,
    timeout_s: opts.timeoutS,
    grace_ms: timings.graceMs,
    drain_ms: timings.drainMs,
    poll_ms: timings.pollMs,
    stdin: opts.stdin,
    ...(opts.bounds ? { bounds: opts.bounds } : {}),
  };
  try {
    writeFileAtomic(join(dir, TASK_FILES.request), JSON.stringify(request) + '\n');
  } catch (err) {
    // Nothing ran: leave no directory behind that would read as a task forever.
    rmSync(dir, { recursive: true, force: true });
    throw isNoSpaceError(err) ? stateDirFull() : err;
  }
  if (runner && (await runner(dir, request))) return;
  // stdio must not be ours: the host's exec returns only when every holder of its pipes is gone.
  // Nor any other descriptor the host's exec leaked to us: the supervisor would inherit it.
  closeInheritedFds();
  const { spawn } = childProcess();
  const debugFd = process.env.AGENT_DEBUG ? openSync(join(dir, 'supervisor-debug.log'), 'a', 0o600) : 'ignore';
  let spawnError: string | undefined;
  let hasExited = false;
  const child = spawn(process.execPath, [resolve(process.argv[1]!), 'supervise', dir], {
    detached: true,
    stdio: ['ignore', 'ignore', debugFd],
    env: opts.env ?? process.env,
    cwd: dir, // pins nothing of the caller's
  });
  child.on('error', (err: NodeJS.ErrnoException) => {
    spawnError = err.code ?? 'error';
    hasExited = true;
  });
  child.on('exit', () => (hasExited = true));
  child.unref();

  const reported = await waitForStatus(dir, timings.startReportMs, () => hasExited);
  if (!reported && spawnError !== undefined && readStatus(dir).kind === 'missing') {
    writeStatus(dir, {
      format: STATUS_FORMAT_VERSION,
      task_id: opts.taskId,
      state: 'failed',
      reason: 'supervisor_error',
      supervisor: null,
      group: null,
      exit_code: null,
      signal: null,
      started_at: null,
      finished_at: Math.floor(Date.now() / 1000),
      stdout_truncated: false,
      stderr_truncated: false,
      error: { code: 'spawn_failed', message: `the task supervisor could not be started (${spawnError})` },
    });
    return;
  }
  // A short command may finish within moments: report that rather than `running`.
  const settleUntil = Date.now() + timings.startSettleMs;
  while (Date.now() < settleUntil && !hasExited) {
    if (TERMINAL_STATES.has(observeTask(dir).state)) return;
    await sleep(Math.min(START_POLL_MS, timings.pollMs));
  }
}

/** Polls until the status file exists; false if `withinMs` passed or `isHopeless()` said to stop. */
async function waitForStatus(dir: string, withinMs: number, isHopeless: () => boolean): Promise<boolean> {
  const until = Date.now() + withinMs;
  for (;;) {
    if (readStatus(dir).kind !== 'missing') return true;
    // Once the supervisor has exited, one last look decides.
    if (isHopeless()) return readStatus(dir).kind !== 'missing';
    if (Date.now() >= until) return false;
    await sleep(START_POLL_MS);
  }
}

/** Relative paths (and no path) resolve against the home directory, like every other sandbox path. */
function resolveCwd(cwd: string | undefined): string {
  let path: string;
  if (cwd !== undefined && isAbsolute(cwd)) path = cwd;
  else {
    const home = homeDir();
    if (home === null)
      throw new AgentFailure(
        'invalid_request',
        'field `cwd` must be an absolute path here: HOME is unset and this user has no home directory',
      );
    path = cwd === undefined ? home : resolve(home, cwd);
  }
  let isDir: boolean;
  try {
    isDir = statSync(path).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) throw new AgentFailure('invalid_request', 'field `cwd` is not an existing directory');
  return path;
}

/** Time since the directory last changed (its files are created right after it). */
function ageMs(dir: string): number {
  try {
    return Date.now() - statSync(dir).mtimeMs;
  } catch {
    return Infinity;
  }
}

function countTasks(tasks: string): number {
  return readdirSync(tasks).length;
}

function taskLimit(): AgentFailure {
  return new AgentFailure(
    'task_limit',
    `this sandbox user already has ${LIMITS.maxTasks} task directories, the maximum; destroy the sandbox (or use another) to start more tasks`,
  );
}
