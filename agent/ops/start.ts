// start: create the task directory exclusively, launch a detached supervisor, and report what it
// observed shortly afterwards. The exclusive mkdir is what makes "same task_id twice runs once"
// hold even for concurrent starts.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { nodeRelaunch } from '../../shared/agent-runtime.js';
import { LIMITS } from '../../shared/limits.js';
import { TERMINAL_STATES, type TaskView } from '../../shared/protocol.js';
import type { RunAs } from '../run-as.js';
import { initialStatus } from '../../shared/status.js';
import { AgentFailure } from '../errors.js';
import { isNoSpaceError, stateDirFull } from '../no-space.js';
import { ensureTasksDir, homeDir, TASK_FILES } from '../paths.js';
import { writeFileAtomic, writeStatus } from '../status-file.js';
import { readStatus } from '../status-read.js';
import type { JobBounds } from '../../shared/job-bounds.js';
import type { TaskRequestFile } from '../task-request.js';
import { buildView, observeTask, type ObservedTask, type PageOpts } from '../task-view.js';
import type { Timings } from '../timing.js';
import { watchDirChanges, type DirChanges } from '../dir-changes.js';
import { childProcess } from '../node-modules.js';
import { EXEC_DRAIN_GRACE_MS } from '../exec-run.js';
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
  /** false: a command's leftovers in its group outlive it (a promotable exec, as a plain one); default true. */
  reapsGroup?: boolean;
  /** The ids the command runs as (run-as.ts); absent: the supervisor's. */
  runAs?: RunAs;
  /** The protocol's `remove_file`: the supervisor unlinks it once the command has ended. */
  removeFile?: string;
}

const START_POLL_MS = 10;

/** The first page of each log: what a start reports. */
const FIRST_PAGE: PageOpts = { stdoutOffset: 0, stderrOffset: 0, limit: LIMITS.pageDefaultBytes };

/** Starts the task unless its directory exists; either way returns the task's observed view (page 0). */
export async function startTask(opts: StartOpts, timings: Timings, launch: SupervisorLauncher = spawnSupervisor): Promise<TaskView> {
  const tasks = ensureTasksDir();
  const dir = join(tasks, opts.taskId);
  const claim = claimTaskDir(tasks, dir, opts.cwd);
  let ended: ObservedTask | null = null;
  if (claim) ended = await launchClaimed(dir, opts, claim.cwd, timings, launch);
  else {
    // An existing task (or one a concurrent start just created) is reported, never started again.
    // A directory that is still young may belong to a start in progress: give it time to report.
    const changes = watchDirChanges(dir, TASK_FILES.status);
    try {
      await waitForStatus(dir, timings.startReportMs - ageMs(dir), () => false, changes);
    } finally {
      changes.close();
    }
  }
  return buildView(opts.taskId, dir, ended ?? observeTask(dir), FIRST_PAGE);
}

/**
 * Starts a task under a new id: null, and nothing started, when its directory exists. The view
 * shows `page` of each log (a promotable exec reads its logs itself once the task ends).
 */
export async function startNewTask(
  opts: StartOpts,
  timings: Timings,
  launch: SupervisorLauncher,
  page: PageOpts,
): Promise<TaskView | null> {
  const tasks = ensureTasksDir();
  const dir = join(tasks, opts.taskId);
  const claim = claimTaskDir(tasks, dir, opts.cwd);
  if (!claim) return null;
  const ended = await launchClaimed(dir, opts, claim.cwd, timings, launch);
  return buildView(opts.taskId, dir, ended ?? observeTask(dir), page);
}

/**
 * Writes the request into the claimed directory, launches its supervisor and waits for its first
 * report; the task's end if it was seen meanwhile (a final status does not change: it need not be read again).
 */
async function launchClaimed(
  dir: string,
  opts: StartOpts,
  cwd: string,
  timings: Timings,
  launch: SupervisorLauncher,
): Promise<ObservedTask | null> {
  const request = writeRequest(dir, opts, cwd, timings);
  // Watched before the launch: the supervisor's first status may come at once.
  const changes = watchDirChanges(dir, TASK_FILES.status);
  try {
    return await awaitFirstReport(dir, opts.taskId, launch(dir, opts.env ?? process.env, request), timings, changes);
  } finally {
    changes.close();
  }
}

/**
 * Creates the task's directory exclusively — the claim that makes "the same task_id twice runs
 * once" hold even for concurrent starts — within the task limit. Null when it exists already.
 */
function claimTaskDir(tasks: string, dir: string, cwd: string | undefined): { cwd: string } | null {
  if (existsSync(dir)) return null;
  const resolvedCwd = resolveCwd(cwd);
  if (countTasks(tasks) >= LIMITS.maxTasks) throw taskLimit();
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if (isNoSpaceError(err)) throw stateDirFull();
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return null;
  }
  // Two starts racing for the last slots may both get here; one more count keeps the bound.
  if (countTasks(tasks) > LIMITS.maxTasks) {
    rmdirSync(dir);
    throw taskLimit();
  }
  return { cwd: resolvedCwd };
}

/** The request file the supervisor reads; on failure the claimed directory goes too. */
function writeRequest(dir: string, opts: StartOpts, cwd: string, timings: Timings): TaskRequestFile {
  const request: TaskRequestFile = {
    task_id: opts.taskId,
    command: opts.command,
    cwd,
    timeout_s: opts.timeoutS,
    grace_ms: timings.graceMs,
    // Leftovers may hold the output pipes open: then the wait for their end is a plain exec's.
    drain_ms: opts.reapsGroup === false ? Math.min(timings.drainMs, EXEC_DRAIN_GRACE_MS) : timings.drainMs,
    poll_ms: timings.pollMs,
    stdin: opts.stdin,
    ...(opts.bounds ? { bounds: opts.bounds } : {}),
    ...(opts.reapsGroup === false ? { reap_group: false } : {}),
    ...(opts.runAs ? { run_as: opts.runAs } : {}),
    ...(opts.removeFile !== undefined ? { remove_file: opts.removeFile } : {}),
  };
  try {
    writeFileAtomic(join(dir, TASK_FILES.request), JSON.stringify(request) + '\n');
  } catch (err) {
    // Nothing ran: leave no directory behind that would read as a task forever.
    rmSync(dir, { recursive: true, force: true });
    throw isNoSpaceError(err) ? stateDirFull() : err;
  }
  return request;
}

/** What start sees of the supervisor it launched, kept current by the child's events. */
export interface SupervisorWatch {
  hasExited: boolean;
  /** The errno code when it could not be spawned. */
  spawnError: string | undefined;
}

/** Launches the supervisor of the task in `dir` (whose request is written: `request`), the command getting `env`. */
export type SupervisorLauncher = (dir: string, env: NodeJS.ProcessEnv, request: TaskRequestFile) => SupervisorWatch;

/** Spawns the detached supervisor of the task in `dir`, sharing nothing of ours. */
export function spawnSupervisor(dir: string, env: NodeJS.ProcessEnv): SupervisorWatch {
  // stdio must not be ours: the host's exec returns only when every holder of its pipes is gone.
  // Nor any other descriptor the host's exec leaked to us: the supervisor would inherit it.
  closeInheritedFds();
  const { spawn } = childProcess();
  const debugFd = process.env.AGENT_DEBUG ? openSync(join(dir, 'supervisor-debug.log'), 'a', 0o600) : 'ignore';
  // Under the sandbox's agent runtime, process.execPath is its loader (see shared/agent-runtime.ts).
  const node = nodeRelaunch(process.execPath, [resolve(process.argv[1]!), 'supervise', dir]);
  const child = spawn(node.file, node.args, {
    detached: true,
    stdio: ['ignore', 'ignore', debugFd],
    env,
    cwd: dir, // pins nothing of the caller's
  });
  const watch = watchChild(child);
  child.on('error', (err: NodeJS.ErrnoException) => {
    watch.spawnError = err.code ?? 'error';
    watch.hasExited = true;
  });
  child.unref();
  return watch;
}

/**
 * A watch on a spawned supervisor, kept current by its exit. Each launcher records its own
 * spawnError: a cold spawn from the child's `error`, a hand-over from its stdin's.
 */
export function watchChild(child: ChildProcess): SupervisorWatch {
  const watch: SupervisorWatch = { hasExited: false, spawnError: undefined };
  child.on('exit', () => (watch.hasExited = true));
  return watch;
}

/**
 * Waits for the supervisor's first status (recording the failure itself when the supervisor could
 * not be spawned), then briefly for a short command to finish, so start reports that rather than
 * `running`: the ended task as observed then, else null.
 */
async function awaitFirstReport(
  dir: string,
  taskId: string,
  supervisor: SupervisorWatch,
  timings: Timings,
  changes: DirChanges,
): Promise<ObservedTask | null> {
  const isReported = await waitForStatus(dir, timings.startReportMs, () => supervisor.hasExited, changes);
  if (!isReported && supervisor.spawnError !== undefined && readStatus(dir).kind === 'missing') {
    writeStatus(dir, {
      ...initialStatus(taskId),
      state: 'failed',
      reason: 'supervisor_error',
      finished_at: Math.floor(Date.now() / 1000),
      error: { code: 'spawn_failed', message: `the task supervisor could not be started (${supervisor.spawnError})` },
    });
    return null;
  }
  const settleAtMs = Date.now() + timings.startSettleMs;
  while (Date.now() < settleAtMs && !supervisor.hasExited) {
    const observed = observeTask(dir);
    if (TERMINAL_STATES.has(observed.state)) return observed;
    await changes.next(Math.min(START_POLL_MS, timings.pollMs, settleAtMs - Date.now()));
  }
  return null;
}

/** Polls until the status file exists; false if `withinMs` passed or `isHopeless()` said to stop. */
async function waitForStatus(dir: string, withinMs: number, isHopeless: () => boolean, changes: DirChanges): Promise<boolean> {
  const giveUpAtMs = Date.now() + withinMs;
  for (;;) {
    if (readStatus(dir).kind !== 'missing') return true;
    // Once the supervisor has exited, one last look decides.
    if (isHopeless()) return readStatus(dir).kind !== 'missing';
    if (Date.now() >= giveUpAtMs) return false;
    await changes.next(START_POLL_MS);
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
    `this sandbox user already has ${LIMITS.maxTasks} task directories, the maximum: remove those of finished tasks you no longer need ` +
      `(run_command: rm -r ~/.local/state/sandbox-agent/tasks/<task_id>), or use another sandbox`,
  );
}
