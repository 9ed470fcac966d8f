// start: create the task directory exclusively, launch a detached supervisor, and report what it
// observed shortly afterwards. The exclusive mkdir is what makes "same task_id twice runs once"
// hold even for concurrent starts.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { nodeRelaunch } from '../../shared/agent-runtime.js';
import { parseProcStat, type ProcStat } from '../../shared/proc-stat.js';
import { LIMITS } from '../../shared/limits.js';
import { TERMINAL_STATES, type TaskView } from '../../shared/protocol.js';
import type { RunAs } from '../run-as.js';
import { initialStatus } from '../../shared/status.js';
import { AgentFailure, spawnErrorCode } from '../errors.js';
import { isNoSpaceError, stateDirFull } from '../no-space.js';
import { ensureTasksDir, homeDir, TASK_FILES } from '../paths.js';
import { writeFileAtomic, writeStatus } from '../status-file.js';
import { readStatus, type StatusRead } from '../status-read.js';
import type { JobBounds } from '../../shared/job-bounds.js';
import type { TaskRequestFile } from '../task-request.js';
import { buildView, observeStatus, observeTask, type ObservedTask, type PageOpts } from '../task-view.js';
import type { Timings } from '../timing.js';
import { toldChanges, watchDirChanges, type DirChanges, type ToldChanges } from '../dir-changes.js';
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
  if (claim) ended = (await launchClaimed(dir, opts, claim.cwd, timings, launch)).ended;
  else {
    // An existing task (or one a concurrent start just created) is reported, never started again.
    // A directory that is still young may belong to a start in progress: give it time to report.
    const untilMs = Date.now() + timings.startReportMs - ageMs(dir);
    await withStatusWatch(dir, (changes) => awaitStatusFile(dir, untilMs, () => false, changes));
  }
  return buildView(opts.taskId, dir, ended ?? observeTask(dir), FIRST_PAGE);
}

/** A task startNewTask started: its state as observed once its supervisor reported, and that supervisor. */
export interface StartedTask {
  /** Its end if seen meanwhile (a final status does not change), else the task as observed after the settle. */
  observed: ObservedTask;
  supervisor: SupervisorWatch;
}

/**
 * Starts a task under a new id: null, and nothing started, when its directory exists. No log is
 * read (a promotable exec reads its logs itself once the task ends, or a page of them if it runs on).
 */
export async function startNewTask(opts: StartOpts, timings: Timings, launch: SupervisorLauncher): Promise<StartedTask | null> {
  const tasks = ensureTasksDir();
  const dir = join(tasks, opts.taskId);
  const claim = claimTaskDir(tasks, dir, opts.cwd);
  if (!claim) return null;
  const { ended, supervisor } = await launchClaimed(dir, opts, claim.cwd, timings, launch);
  return { observed: ended ?? observeTask(dir), supervisor };
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
): Promise<{ ended: ObservedTask | null; supervisor: SupervisorWatch }> {
  const request = writeRequest(dir, opts, cwd, timings);
  const supervisor = launch(dir, opts.env ?? process.env, request);
  const launched: Launched = { dir, taskId: opts.taskId, supervisor };
  // A reused supervisor tells of its status writes; a cold one's are seen in the task directory.
  const ended = supervisor.told ? await awaitToldReport(launched, supervisor.told, timings) : await awaitWatchedReport(launched, timings);
  // A spawn that failed was recorded (recordSpawnFailure) without its end being read.
  const seen = ended ?? (supervisor.spawnError !== undefined ? observeTask(dir) : null);
  if (seen?.state === 'failed' && seen.error?.code === 'out_of_processes') {
    // No process (or memory) for its supervisor or its command: nothing ran, and the call fails
    // saying so (never a task that ended with no exit code). Nobody was told its id: it goes.
    await supervisorGoneWithin(supervisor, timings.inputWaitMs);
    rmSync(dir, { recursive: true, force: true });
    throw new AgentFailure('out_of_processes', seen.error.message);
  }
  return { ended, supervisor };
}

/**
 * Creates the task's directory exclusively — the claim that makes "the same task_id twice runs
 * once" hold even for concurrent starts — within the task limit. Null when it exists already.
 */
function claimTaskDir(tasks: string, dir: string, cwd: string | undefined): { cwd: string } | null {
  if (existsSync(dir)) return null;
  const resolvedCwd = resolveCwd(cwd);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if (isNoSpaceError(err)) throw stateDirFull();
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    return null;
  }
  // Counted once the directory is made, which keeps the bound when starts race for the last slots
  // (each counts the others' directories too); a count before the mkdir would only repeat this one.
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
  /** It exited, or (a reused supervisor) it said its task ended and it left the task's directory. */
  hasExited: boolean;
  /** The errno code when it could not be spawned (or, a reused one, handed its task). */
  spawnError: string | undefined;
  /** A telling supervisor (`told`) said its task's first status is written. */
  hasReported: boolean;
  /** Called once hasExited turns true (supervisorGone). */
  onGone?: (() => void) | undefined;
  /**
   * A reused supervisor's word on its task's status, instead of a watch on the task directory: it
   * says when it has written the first status and when the final one (it is then gone); absent
   * (a cold supervisor), start watches the directory.
   */
  told?: ToldChanges;
}

/** A watch on a supervisor just launched (`isTelling`: one that tells its status writes). */
export function newSupervisorWatch(isTelling = false): SupervisorWatch {
  return { hasExited: false, spawnError: undefined, hasReported: false, ...(isTelling ? { told: toldChanges() } : {}) };
}

/** Records that the supervisor has exited, or (reused) left its task; whoever waits on it (supervisorGoneWithin, told changes) goes on. */
export function supervisorGone(watch: SupervisorWatch): void {
  if (watch.hasExited) return;
  watch.hasExited = true;
  watch.told?.notify();
  const onGone = watch.onGone;
  watch.onGone = undefined;
  onGone?.();
}

/** Resolves once the supervisor is gone (supervisorGone), or after `ms` at the latest. */
export function supervisorGoneWithin(watch: SupervisorWatch, ms: number): Promise<void> {
  if (watch.hasExited) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      watch.onGone = undefined;
      resolve();
    }
    watch.onGone = done;
  });
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
  const node = nodeRelaunch(process.execPath, [...SUPERVISOR_NODE_FLAGS, resolve(process.argv[1]!), 'supervise', dir]);
  let child: ChildProcess;
  try {
    child = spawn(node.file, node.args, {
      detached: true,
      stdio: ['ignore', 'ignore', debugFd],
      env,
      cwd: dir, // pins nothing of the caller's
    });
  } catch (err) {
    // Node throws some spawn failures (ENOMEM) where it emits others (EAGAIN): both are recorded.
    const watch = newSupervisorWatch();
    watch.spawnError = (err as NodeJS.ErrnoException).code ?? 'error';
    supervisorGone(watch);
    return watch;
  }
  const watch = newSupervisorWatch();
  const spawnedAt = Date.now();
  // Before watchChild's own listener: the start reads spawnError once the supervisor is gone.
  child.on('exit', (_code, signal) => {
    if (abortedStarting(signal, spawnedAt)) watch.spawnError ??= 'EAGAIN';
  });
  watchChild(child, watch);
  child.on('error', (err: NodeJS.ErrnoException) => {
    watch.spawnError = err.code ?? 'error';
    supervisorGone(watch);
  });
  killIfStuckStarting(child, () => (watch.spawnError ??= 'EAGAIN'));
  child.unref();
  return watch;
}

/** Fewer threads than a node (with SUPERVISOR_NODE_FLAGS) has once its platform has started: main, its worker, its delayed-task thread. */
const STARTED_NODE_THREADS = 3;
/** How long a supervisor may stay below STARTED_NODE_THREADS before it counts as stuck (a start takes ~50 ms). */
const STUCK_STARTING_MS = 2000;
const STUCK_CHECK_MS = 1000;

/**
 * Kills a supervisor stuck in node's start and calls `onStuck` first. Near the user's process
 * limit a node that could create some of its platform threads but not all waits for them forever
 * (measured: `--v8-pool-size=1` with room for one thread: 2 threads, main in a futex wait) and
 * never runs our code: it has neither read a hand-over nor spawned a command, so killing it
 * is safe, and the start then records it as not started (EAGAIN: out_of_processes). A node
 * still below the platform's threads 2 s after its spawn, having spent no CPU and not waiting to
 * run through two seconds of looks (a second apart), is stuck; one that reached the threads is
 * left alone for good, and one merely slow (a machine so busy that node's start takes seconds: it
 * spends CPU, or waits runnable) is looked at again.
 */
export function killIfStuckStarting(child: ChildProcess, onStuck: () => void): void {
  const pid = child.pid;
  if (pid === undefined) return;
  const spawnedAt = Date.now();
  let looksStuck = 0;
  let lastCpuTicks = -1;
  const timer = setInterval(() => {
    const stat = procStatOf(pid);
    if (child.exitCode !== null || child.signalCode !== null || stat === null || stat.threads >= STARTED_NODE_THREADS) {
      clearInterval(timer);
      return;
    }
    const isProgressing = stat.state === 'R' || stat.cpuTicks !== lastCpuTicks;
    lastCpuTicks = stat.cpuTicks;
    looksStuck = isProgressing ? 0 : looksStuck + 1;
    if (Date.now() - spawnedAt < STUCK_STARTING_MS || looksStuck < 2) return;
    clearInterval(timer);
    onStuck();
    child.kill('SIGKILL');
  }, STUCK_CHECK_MS);
  timer.unref();
  child.once('exit', () => clearInterval(timer));
}

/**
 * True for a supervisor that node aborted (SIGABRT) within STUCK_STARTING_MS of its spawn: near the
 * user's process limit a node that can create none of its platform threads aborts at once
 * (measured: room for the process alone). Its task is recorded as not started: it cannot have
 * run the command and written no status in that time but by a crash of node itself.
 */
export function abortedStarting(signal: NodeJS.Signals | null, spawnedAt: number): boolean {
  return signal === 'SIGABRT' && Date.now() - spawnedAt < STUCK_STARTING_MS;
}

/** `pid`'s /proc stat, or null when it is gone or unreadable. */
function procStatOf(pid: number): ProcStat | null {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'latin1'));
  } catch {
    return null;
  }
}

/**
 * Node flags of every supervisor (cold or booted by the resident): one V8 platform worker, not one
 * per core but one, as the keeper and the resident have. Near the user's process limit a node that
 * cannot create a worker thread waits for it forever (the keeper's hang, keeper/start.ts): a
 * supervisor stuck so left its call unanswered (measured: 5 left, no answer in 15 s).
 */
export const SUPERVISOR_NODE_FLAGS: readonly string[] = ['--v8-pool-size=1'];

/**
 * A watch on a spawned supervisor, kept current by its exit. Each launcher records its own
 * spawnError: a cold spawn from the child's `error`, a hand-over from its stdin's.
 */
export function watchChild(child: ChildProcess, watch = newSupervisorWatch()): SupervisorWatch {
  child.on('exit', () => supervisorGone(watch));
  return watch;
}

// --- the first report -----------------------------------------------------------------------------
// Start waits for the supervisor's first status (so that its answer shows a task that is recorded),
// then briefly (startSettleMs) for a short command's end, so that it answers that rather than
// `running`. A cold supervisor is followed through the task directory; a reused one tells its
// status writes on its pipe (warm-supervisor.ts), so its directory is neither watched nor polled.

/** A task whose supervisor start has just launched. */
interface Launched {
  dir: string;
  taskId: string;
  supervisor: SupervisorWatch;
}

/**
 * A cold supervisor's first report, seen in the task directory: the ended task as observed then,
 * else null (the caller observes the task; a supervisor that could not be spawned is recorded).
 */
async function awaitWatchedReport(launched: Launched, timings: Timings): Promise<ObservedTask | null> {
  const { dir, supervisor } = launched;
  const isGone = () => supervisor.hasExited;
  // Its first status may have come before the watch: each wait reads the status before it waits for a change.
  return withStatusWatch(dir, async (changes) => {
    const read = await awaitStatusFile(dir, Date.now() + timings.startReportMs, isGone, changes);
    if (read.kind === 'missing' && recordSpawnFailure(launched)) return null;
    // The read that found the first report is the settle's first look.
    return settleWatched(dir, read, Date.now() + timings.startSettleMs, isGone, changes, Math.min(START_POLL_MS, timings.pollMs));
  });
}

/**
 * A reused supervisor's first report, by its word: `running` once the first status is written,
 * `free` (or its exit) once the final one is. The word misses nothing, so there is no poll, and the
 * status is read only once the supervisor has left the task: the ended task then, else null.
 */
async function awaitToldReport(launched: Launched, told: ToldChanges, timings: Timings): Promise<ObservedTask | null> {
  const { dir, supervisor } = launched;
  const isGone = () => supervisor.hasExited;
  await awaitTold(told, Date.now() + timings.startReportMs, () => supervisor.hasReported || isGone());
  if (isGone()) {
    // It has left the task (its `free`, or its exit): the status now is its last.
    const read = readStatus(dir);
    if (read.kind === 'missing') recordSpawnFailure(launched);
    return endOf(dir, read);
  }
  // Neither word in time: if its hand-over failed, nothing will ever write a status.
  if (!supervisor.hasReported && recordSpawnFailure(launched)) return null;
  await awaitTold(told, Date.now() + timings.startSettleMs, isGone);
  return isGone() ? endOf(dir, readStatus(dir)) : null;
}

/** Waits, woken by each of the supervisor's words, until `isDone()` or `untilMs`. */
async function awaitTold(told: ToldChanges, untilMs: number, isDone: () => boolean): Promise<void> {
  while (!isDone() && Date.now() < untilMs) await told.next(untilMs - Date.now());
}

/**
 * Reads the task's status until it exists: its last read (`missing` once `untilMs` has passed, or
 * once the supervisor is gone without writing it).
 */
async function awaitStatusFile(dir: string, untilMs: number, isGone: () => boolean, changes: DirChanges): Promise<StatusRead> {
  for (;;) {
    const read = readStatus(dir);
    // Gone before this read (nothing runs between the two): the read was the last look.
    if (read.kind !== 'missing' || isGone() || Date.now() >= untilMs) return read;
    await changes.next(Math.min(START_POLL_MS, untilMs - Date.now()));
  }
}

/**
 * Reads the status at each change (or poll) until it says the task ended: its end, or null once
 * `untilMs` has passed or the supervisor is gone (a running one's supervisor is checked by
 * whoever observes the task next).
 */
async function settleWatched(
  dir: string,
  read: StatusRead,
  untilMs: number,
  isGone: () => boolean,
  changes: DirChanges,
  pollMs: number,
): Promise<ObservedTask | null> {
  for (;;) {
    const ended = endOf(dir, read);
    if (ended || Date.now() >= untilMs || isGone()) return ended;
    await changes.next(Math.min(pollMs, untilMs - Date.now()));
    read = readStatus(dir);
  }
}

/** The task as observed, when `read` shows its end (a final status does not change: it need not be read again). */
function endOf(dir: string, read: StatusRead): ObservedTask | null {
  return read.kind === 'ok' && TERMINAL_STATES.has(read.status.state) ? observeStatus(dir, read) : null;
}

/**
 * Records the task as failed when its supervisor could not be spawned (or handed its task) and no
 * status was written meanwhile; true when it did.
 */
function recordSpawnFailure({ dir, taskId, supervisor }: Launched): boolean {
  if (supervisor.spawnError === undefined || readStatus(dir).kind !== 'missing') return false;
  writeStatus(dir, {
    ...initialStatus(taskId),
    state: 'failed',
    reason: 'supervisor_error',
    finished_at: Math.floor(Date.now() / 1000),
    error: { code: spawnErrorCode(supervisor.spawnError), message: `the task supervisor could not be started (${supervisor.spawnError})` },
  });
  return true;
}

/** Runs `wait` with a watch on the task's status file, closed after. */
async function withStatusWatch<T>(dir: string, wait: (changes: DirChanges) => Promise<T>): Promise<T> {
  const changes = watchDirChanges(dir, TASK_FILES.status);
  try {
    return await wait(changes);
  } finally {
    changes.close();
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
