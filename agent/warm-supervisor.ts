// A supervisor booted ahead of the next start (`agent.cjs supervise --warm`). A start through the
// resident needs a detached supervisor from the command's first byte (resident-tasks.ts), and a
// node start-up is most of what such a start costs. So while starts keep coming, the resident
// keeps one supervisor booted and blocked on its stdin; a start hands it the task directory and
// the command's environment as one JSON line and boots the next. It is retired after a while
// without starts, so an idle sandbox holds no supervisor it does not use.
//
// The hand-over is the whole contract: before it, the warm supervisor is nobody's (end of file on
// its stdin, the resident stopped or died, makes it exit); after it, it is that task's supervisor
// like any other, detached in its own session, and reads the command's output itself. A line
// before it may say what the next command's start will look like (the last one's cwd,
// environment and bounds): the command's first process is then started ahead (pending-shell.ts),
// reading its stdin from a socket whose other end the resident holds, and the resident, told
// the shell is there, writes a matching task's command to it itself, right after the hand-over.
import type { ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { closeSync, existsSync, openSync, readdirSync, readSync, renameSync, statSync, writeSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { nodeRelaunch } from '../shared/agent-runtime.js';
import { LIMITS } from '../shared/limits.js';
import { CappedLog } from './capped-log.js';
import { closeFifoPipes, closeQuietly, createFifoPipesAhead, type FifoPipe } from './drain-pipes.js';
import { closeInheritedFds } from './inherited-fds.js';
import { childProcess, net } from './node-modules.js';
import { ensureTasksDir, stateDir } from './paths.js';
import { readProcStat } from './proc.js';
import type { ProcStat } from '../shared/proc-stat.js';
import { removeFileQuietly } from './remove-file.js';
import { secretValuesFromEnv } from './secret-masker.js';
import { isReserveFile, writeReserveFile } from './status-reserve.js';
import { commandEnv } from './task-env.js';
import { commandPrelude, commandShells, oneShellCommand, RUNNING_LINE, type MadeAhead } from './supervisor.js';
import {
  abortedStarting,
  killIfStuckStarting,
  newSupervisorWatch,
  SUPERVISOR_NODE_FLAGS,
  supervisorGone,
  type SupervisorLauncher,
  type SupervisorWatch,
} from './ops/start.js';
import {
  commandLines,
  discardPendingShell,
  isShellFor,
  READY_PREFIX,
  spawnPendingShell,
  type CommandShape,
  type PendingShell,
  type ReadyShell,
} from './pending-shell.js';
import type { TaskRequestFile } from './task-request.js';

/**
 * The warm supervisor's descriptor for the socket that becomes the shell's stdin: the resident
 * spawns it with a fourth stdio entry, a socket pair whose other end the resident keeps, and says
 * so with SHELL_SOCKET_ARG (without it, fd 3 may be one of node's own: node marks inherited
 * descriptors close-on-exec at start-up, so nothing in /proc tells them apart).
 */
const SHELL_SOCKET_FD = 3;
export const SHELL_SOCKET_ARG = '--shell-socket-fd-3';

/**
 * The hand-over line: the task directory (under this user's tasks folder), the command's
 * environment, the task's request as written there (read from the directory when absent), and
 * whether the resident gave the command to the shell started ahead (it writes the command there
 * right after this line).
 */
interface Handover {
  dir: string;
  env: Record<string, string>;
  request?: TaskRequestFile;
  given?: boolean;
}

/**
 * Checked by hand, not with a zod schema: the line is our own resident's, and a supervisor stays
 * free of zod (its first use compiles for a millisecond or more, on the start's critical path).
 */
function isHandover(value: unknown): value is Handover {
  if (typeof value !== 'object' || value === null) return false;
  const { dir, env, request, given } = value as Record<string, unknown>;
  return (
    typeof dir === 'string' &&
    isEnv(env) &&
    (request === undefined || isRequest(request)) &&
    (given === undefined || typeof given === 'boolean')
  );
}

/** The request's fields a supervisor reads before any other (the rest are optional). */
function isRequest(value: unknown): value is TaskRequestFile {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as Record<string, unknown>;
  return (
    typeof r.task_id === 'string' &&
    typeof r.command === 'string' &&
    typeof r.cwd === 'string' &&
    ['timeout_s', 'grace_ms', 'drain_ms', 'poll_ms'].every((name) => typeof r[name] === 'number')
  );
}

/** The line before a hand-over: what the next command's start will probably look like. */
interface Expectation {
  expect: CommandShape;
}

function isExpectation(value: unknown): value is Expectation {
  if (typeof value !== 'object' || value === null) return false;
  const shape = (value as Record<string, unknown>).expect;
  if (typeof shape !== 'object' || shape === null) return false;
  const { cwd, env, bounds, runAs } = shape as Record<string, unknown>;
  return (
    typeof cwd === 'string' &&
    cwd.startsWith('/') &&
    isEnv(env) &&
    (bounds === undefined || isBounds(bounds)) &&
    (runAs === undefined || isRunAs(runAs))
  );
}

function isRunAs(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { uid, gid } = value as Record<string, unknown>;
  const isId = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 && n < 0xffffffff;
  return isId(uid) && isId(gid);
}

function isEnv(env: unknown): env is Record<string, string> {
  return typeof env === 'object' && env !== null && !Array.isArray(env) && Object.values(env).every((v) => typeof v === 'string');
}

function isBounds(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const { processes, openFiles, oomScoreAdj } = value as Record<string, unknown>;
  const isCount = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  return isCount(processes) && isCount(openFiles) && (oomScoreAdj === null || Number.isSafeInteger(oomScoreAdj));
}

/** A supervisor the resident booted, and what it knows of the shell that supervisor started ahead. */
interface Booted {
  child: ChildProcess;
  /** The resident's end of the shell's stdin; null once used (only a supervisor's first task can have one). */
  shellSocket: Socket | null;
  /** Set once the supervisor says its shell is started (for the shape it was told to expect). */
  shell: ReadyShell | null;
  /** The task it supervises now; null while it waits for one. */
  task: SupervisorWatch | null;
  /** Retires it once it has waited for a task this long. */
  retireTimer: NodeJS.Timeout | undefined;
}

/** The longest `ready <pid>` line the resident reads; anything longer is not one. */
const READY_LINE_MAX = 64;
/** What a reusable supervisor writes on its stdout once its task has ended and it is out of the task's directory. */
const FREE_LINE = 'free';
// Before it, once its task's first status is written: RUNNING_LINE (supervisor.ts).
/** At most this many supervisors wait for a task; one more that comes free is retired. */
const MAX_WAITING = 4;

/**
 * The resident's side: the supervisors waiting for a task, handed the next start or promotable
 * exec one by one. A supervisor whose task ends comes back (it says `free`) and waits for the
 * next, so a run of calls starts no node process: the pool grows to the number of tasks run at
 * once, and each supervisor is retired after it has waited idleMs.
 */
export class WarmSupervisor {
  /** Supervisors waiting for a task, the one waiting longest first (each is used in turn, none ages out under load). */
  private readonly waiting: Booted[] = [];
  /** How the last command without stdin started: the next one probably starts so too. */
  private lastShape: CommandShape | null = null;
  /** Set while a boot waits for the resident's requests to pause (prepareWhenQuiet). */
  private quietTimer: NodeJS.Timeout | undefined;

  constructor(
    /** The launcher used when no supervisor can be booted (the cold way: spawned with its directory). */
    private readonly cold: SupervisorLauncher,
    /** How long a supervisor waits for a task before it is retired. */
    private readonly idleMs: number,
    /** How long no request may arrive before a wanted boot begins (0: at once). */
    private readonly quietMs: number,
  ) {}

  /**
   * Boots a supervisor ahead (unless one waits) once no request has arrived for the quiet period:
   * after a start, whose supervisor stays with its task for as long as the task runs. A node
   * start-up (about 100 ms of CPU on Node 20) right after an answer slowed the calls that followed
   * it back to back on 2 cores. A call that finds none waiting boots one for itself.
   */
  prepareWhenQuiet(): void {
    if (this.quietMs === 0) return this.prepare();
    clearTimeout(this.quietTimer);
    this.quietTimer = setTimeout(() => {
      this.quietTimer = undefined;
      this.prepare();
    }, this.quietMs);
    this.quietTimer.unref();
  }

  /** A request arrived: a boot waiting for quiet waits again. */
  noteRequest(): void {
    if (this.quietTimer) this.quietTimer.refresh();
  }

  /**
   * Launches the supervisor of the task in `dir`: one that waits for a task if there is one, else
   * one booted for it (the cold way only when none can be booted).
   */
  readonly launch: SupervisorLauncher = (dir, env, request) => {
    const taskEnv = definedOnly(env);
    if (!request.stdin)
      this.lastShape = {
        cwd: request.cwd,
        env: taskEnv,
        ...(request.bounds ? { bounds: request.bounds } : {}),
        ...(request.run_as ? { runAs: request.run_as } : {}),
      };
    // Booted for this task: no shell ahead (it would not be ready in time), and no eager compile on the call's path.
    const booted = this.take() ?? this.boot(false);
    if (!booted) return this.cold(dir, env, request);
    const isGiven = booted.shell !== null && isShellFor(booted.shell, request, taskEnv);
    return handOver(booted, { dir, env: taskEnv, request, given: isGiven });
  };

  /** Boots a supervisor unless one waits. */
  prepare(): void {
    if (this.waiting.some(isAlive)) return;
    const booted = this.boot(true);
    if (booted) this.wait(booted);
  }

  /** Lets every waiting supervisor go (end of file on its stdin: it exits). */
  retire(): void {
    for (const booted of this.waiting.splice(0)) retireBooted(booted);
  }

  /**
   * Spawns a supervisor (`ahead`: booted before any task, compiled eagerly and, for a start like
   * the last, with the command's first process started); null when none can be spawned now.
   */
  private boot(ahead: boolean): Booted | null {
    // A debug run keeps one log per task from the supervisor's first line: only a cold start has one.
    if (process.env.AGENT_DEBUG) return null;
    let child: ChildProcess;
    try {
      // --no-lazy: compiled while it waits, not function by function on the start's critical path
      // (a promotable exec of `true` 9.6 ms instead of 18.2, for 12 ms more boot and 1.4 MiB).
      const flags = ahead ? ['--no-lazy', ...SUPERVISOR_NODE_FLAGS] : SUPERVISOR_NODE_FLAGS;
      const node = nodeRelaunch(process.execPath, [...flags, resolve(process.argv[1]!), 'supervise', '--warm', SHELL_SOCKET_ARG]);
      child = childProcess().spawn(node.file, node.args, {
        detached: true, // its own session from the start: a task's supervisor must outlive us
        stdio: ['pipe', 'pipe', 'ignore', 'pipe'], // stdout: its `free` lines; the last: SHELL_SOCKET_FD
        cwd: '/', // pins no directory until it has a task
      });
    } catch {
      return null; // no room for a process now: the task goes the cold way
    }
    const booted: Booted = { child, shellSocket: child.stdio[SHELL_SOCKET_FD] as Socket, shell: null, task: null, retireTimer: undefined };
    child.on('error', (err: NodeJS.ErrnoException) => {
      // Never spawned (node gone, no process left): its task is recorded as failed to start, as a
      // cold spawn's is. Node destroys its stdin first, so no write error would say so.
      if (booted.task && child.pid === undefined) booted.task.spawnError ??= err.code ?? 'error';
      this.drop(booted);
    });
    const spawnedAt = Date.now();
    child.on('exit', (_code, signal) => {
      // Aborted in its start (no thread left for it): its task, if it was handed one, never started.
      if (booted.task && !booted.task.hasReported && abortedStarting(signal, spawnedAt)) booted.task.spawnError ??= 'EAGAIN';
      this.drop(booted);
    });
    // Stuck in node's start (no thread left for it): killed, its task (if it was handed one) recorded as not started.
    killIfStuckStarting(child, () => {
      if (booted.task) booted.task.spawnError ??= 'EAGAIN';
    });
    child.stdin!.on('error', (err: NodeJS.ErrnoException) => {
      // Not delivered (it died before reading): start records the task as failed to start.
      if (booted.task) booted.task.spawnError = err.code ?? 'error';
    });
    booted.shellSocket!.on('error', () => {});
    child.stdout!.on(
      'data',
      lineSplitterOf((line) => {
        if (line === RUNNING_LINE) reported(booted.task);
        else if (line === FREE_LINE) this.onFree(booted);
        else retireBooted(booted);
      }),
    );
    // Read once it has booted: its command's first process is then started for this shape.
    if (ahead && this.lastShape) {
      child.stdin!.write(JSON.stringify({ expect: this.lastShape } satisfies Expectation) + '\n');
      awaitReadyShell(booted, this.lastShape);
    } else dropShellSocket(booted);
    child.unref();
    for (const stream of [child.stdin, child.stdout, booted.shellSocket]) (stream as unknown as { unref?: () => void } | null)?.unref?.();
    return booted;
  }

  /** Puts `booted` among those waiting, retired after idleMs unless taken. */
  private wait(booted: Booted): void {
    this.waiting.push(booted);
    clearTimeout(booted.retireTimer);
    booted.retireTimer = setTimeout(() => {
      const i = this.waiting.indexOf(booted);
      if (i >= 0) this.waiting.splice(i, 1);
      retireBooted(booted);
    }, this.idleMs);
    booted.retireTimer.unref();
  }

  private take(): Booted | null {
    for (;;) {
      const booted = this.waiting.shift();
      if (!booted) return null;
      clearTimeout(booted.retireTimer);
      if (isAlive(booted)) return booted;
      dropShellSocket(booted);
    }
  }

  /** Its task ended: it waits for the next (or goes, when enough wait). */
  private onFree(booted: Booted): void {
    const task = booted.task;
    if (!task) return retireBooted(booted); // free without a task: not our protocol
    booted.task = null;
    supervisorGone(task);
    if (this.waiting.length >= MAX_WAITING) retireBooted(booted);
    else this.wait(booted);
  }

  private drop(booted: Booted): void {
    if (booted.task) supervisorGone(booted.task);
    booted.task = null;
    const i = this.waiting.indexOf(booted);
    if (i >= 0) this.waiting.splice(i, 1);
    clearTimeout(booted.retireTimer);
    dropShellSocket(booted);
  }
}

/** Its task's first status is written, it says. */
function reported(task: SupervisorWatch | null): void {
  if (!task) return;
  task.hasReported = true;
  task.told?.notify();
}

function isAlive(booted: Booted): boolean {
  const { child } = booted;
  return child.exitCode === null && child.signalCode === null && child.pid !== undefined && child.stdin?.writable === true;
}

/** Lets a supervisor go: end of file on its stdin (it exits once it reads it, or once its task ends). */
function retireBooted(booted: Booted): void {
  clearTimeout(booted.retireTimer);
  dropShellSocket(booted);
  booted.child.stdin?.end();
}

function dropShellSocket(booted: Booted): void {
  booted.shellSocket?.destroy();
  booted.shellSocket = null;
  booted.shell = null;
}

/** Calls `onLine` with each line of a supervisor's stdout (short lines only: anything else is one line cut off). */
function lineSplitterOf(onLine: (line: string) => void): (chunk: Buffer) => void {
  let text = '';
  return (chunk) => {
    text += chunk.toString('latin1');
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n')) {
      onLine(text.slice(0, nl));
      text = text.slice(nl + 1);
    }
    if (text.length > READY_LINE_MAX) {
      text = '';
      onLine('');
    }
  };
}

/** Reads the booted supervisor's `ready <pid>` line (its shell started for `shape`), then nothing more. */
function awaitReadyShell(booted: Booted, shape: CommandShape): void {
  const socket = booted.shellSocket;
  if (!socket) return;
  let text = '';
  const onData = (chunk: Buffer): void => {
    text += chunk.toString('latin1');
    const nl = text.indexOf('\n');
    if (nl < 0 && text.length <= READY_LINE_MAX) return;
    socket.off('data', onData);
    socket.pause();
    const line = nl < 0 ? '' : text.slice(0, nl);
    const pid = line.startsWith(READY_PREFIX) ? Number(line.slice(READY_PREFIX.length)) : NaN;
    if (Number.isSafeInteger(pid) && pid > 0) booted.shell = { pid, shape };
  };
  socket.on('data', onData);
}

/**
 * Hands the task to a booted supervisor, then gives the command to its shell if `line.given`;
 * the watch follows the supervisor as start's own spawn would. Both writes are made at once, in
 * this order: a resident killed between them leaves a supervisor with its task whose shell reads
 * end of file, so that the task ends (exit 125) having run nothing, never a command without one.
 */
function handOver(booted: Booted, line: Handover): SupervisorWatch {
  // It says when its task's first and final statuses are written (RUNNING_LINE, FREE_LINE): start needs no watch on the directory.
  const watch = newSupervisorWatch(true);
  booted.task = watch;
  booted.child.stdin!.write(JSON.stringify(line) + '\n');
  // A shell that died meanwhile never reads it: its supervisor records how it ended.
  const socket = booted.shellSocket;
  booted.shellSocket = null;
  booted.shell = null;
  if (line.given && socket) socket.end(commandLines(line.request!.command), () => socket.destroy());
  else socket?.destroy();
  return watch;
}

function definedOnly(env: NodeJS.ProcessEnv): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) if (value !== undefined) out[name] = value;
  return out;
}

/** What a warm supervisor got: its task, and what it made while it waited. */
export interface WarmTask {
  dir: string;
  env: NodeJS.ProcessEnv;
  made: MadeAhead;
}

/** Where a warm supervisor keeps its status reserve while it waits (beside the tasks folder, never in it). */
const reservePathOf = (state: string, pid: number): string => join(state, `.warm-${pid}.reserve`);
const RESERVE_NAME = /^\.warm-(\d+)\.reserve$/;

/**
 * The warm supervisor's side: makes the command's output pipes while nobody waits, then blocks
 * until the resident hands it a task. Null at end of file or on a line that is not a task of
 * this user's (the process then exits: it was never anyone's supervisor).
 */
export async function awaitHandover(hasShellSocket: boolean): Promise<WarmTask | null> {
  let tasks: string;
  try {
    tasks = ensureTasksDir();
  } catch {
    return null;
  }
  // What every supervisor does first, done while nobody waits: nothing of the resident's may reach
  // the command, and the modules a supervisor spawns and drains with are loaded now (and their
  // spawn, socket and timer code run once, by createFifoPipesAhead).
  // No socket (a warm supervisor started by hand, say): no shell is started ahead.
  const shellSocket = hasShellSocket ? SHELL_SOCKET_FD : null;
  const isFirstTask = selfStat === undefined;
  // Once: what a reused supervisor opened since is node's own (close-on-exec).
  if (isFirstTask) closeInheritedFds(shellSocket ?? undefined);
  childProcess();
  net();
  const state = stateDir();
  if (isFirstTask) removeOrphanedReserves(state);
  // Made beside the tasks folder, never in it (a listing would see them); the FIFOs' names go once open.
  const outputs = await outputPipesAhead(state);
  const reserve = reservePathOf(state, process.pid);
  // A reused supervisor's last task gave it back unused (writeFinalStatus): it is written only when it is not.
  const hasReserve = isReserveFile(reserve) || writeReserveFile(reserve);
  // The same process from task to task: its /proc stat (its start time) is read once.
  selfStat ??= readProcStat(process.pid);
  const self = selfStat;
  // A reused supervisor has run these steps for real.
  if (isFirstTask) rehearseHandover(tasks, hasReserve ? reserve : null);
  // One for the process: a reused supervisor reads on where its last task's line ended.
  stdin ??= new LineReader(0);
  let line = stdin.next();
  let pending: PendingShell | null = null;
  const expectation = line === null ? null : parseJson(line);
  if (isExpectation(expectation)) {
    if (outputs && shellSocket !== null) pending = startPendingShell(expectation.expect, shellSocket, outputs);
    if (pending) tellShellReady(shellSocket!, pending);
    line = stdin.next();
  }
  // The shell holds its own copy; ours must not reach the command or any helper.
  if (shellSocket !== null) closeQuietly(shellSocket);
  const handover = line === null ? null : parseJson(line);
  if (!isHandover(handover) || dirname(handover.dir) !== tasks) {
    if (pending) discardPendingShell(pending);
    if (outputs) closeFifoPipes(outputs);
    if (hasReserve) removeFileQuietly(reserve);
    return null;
  }
  // Not given the command: it starts the cold way, and the shell goes.
  if (pending && handover.given !== true) {
    discardPendingShell(pending);
    pending = null;
  }
  return {
    dir: handover.dir,
    env: handover.env,
    made: { outputs, reserve: hasReserve ? reserve : null, self, pending, request: handover.request ?? null },
  };
}

/**
 * Tells the resident this supervisor's task has ended and it waits for another; false when the
 * resident is gone (or never listened): the supervisor then exits.
 */
export function tellFree(): boolean {
  try {
    return writeSync(1, FREE_LINE + '\n') === FREE_LINE.length + 1;
  } catch {
    return false;
  }
}

/** This supervisor's own /proc stat, read before its first task; undefined until then. */
let selfStat: ProcStat | null | undefined;

/** Tells the resident the shell is started and waiting (its pid, for the resident's checks before it gives it a command). */
function tellShellReady(socketFd: number, pending: PendingShell): void {
  try {
    writeSync(socketFd, `${READY_PREFIX}${pending.child.pid!}\n`);
  } catch {
    // the resident never learns of it: its next task starts the cold way, and the shell goes then
  }
}

/** The command's first process for a start of `shape`, spawned as the task's own would be. */
function startPendingShell(shape: CommandShape, socketFd: number, outputs: FifoPipe[]): PendingShell | null {
  try {
    if (!statSync(shape.cwd).isDirectory()) return null;
  } catch {
    return null;
  }
  const prelude = commandPrelude(shape.bounds);
  return spawnPendingShell(shape, commandEnv(shape.env), commandShells(), prelude, oneShellCommand(shape.bounds, ''), socketFd, outputs);
}

/**
 * Runs, on a line of its own, the pure steps a task's start takes after the hand-over (reading the
 * line, the command's environment, its secrets), so that their first run (V8 sets up a function's
 * inline caches, and a regular expression is compiled, on first use) is not on the task's path.
 */
function rehearseHandover(tasks: string, reserve: string | null): void {
  const sample = parseJson(JSON.stringify({ dir: join(tasks, 'rehearsal'), env: { HOME: '/' } }));
  if (isHandover(sample)) secretValuesFromEnv(commandEnv(sample.env));
  // The reserve onto itself, which changes nothing: the hand-over's first step is its rename.
  if (reserve !== null) {
    try {
      renameSync(reserve, reserve);
    } catch {
      // placeStatusReserve copes with whatever is wrong with it
    }
  }
}

/**
 * Output pipes made ahead for this supervisor's next tasks, two each, their names already gone
 * (only open descriptors, close-on-exec: no command inherits them). A reused supervisor would
 * otherwise spawn mkfifo for every task: one spawn now makes the pipes of TASKS_PER_MKFIFO.
 */
let stashedPipes: FifoPipe[] = [];
const TASKS_PER_MKFIFO = 16;

/** The next task's stdout and stderr pipes; null: none could be made. */
async function outputPipesAhead(state: string): Promise<FifoPipe[] | null> {
  if (stashedPipes.length < 2) stashedPipes = (await createFifoPipesAheadIntoLog(state, 2 * TASKS_PER_MKFIFO)) ?? [];
  return stashedPipes.length >= 2 ? stashedPipes.splice(0, 2) : null;
}

/** `count` output FIFOs, made ahead, their rehearsal's byte going through a log as a command's would (into /dev/null). */
async function createFifoPipesAheadIntoLog(state: string, count: number): Promise<FifoPipe[] | null> {
  let fd: number | null = null;
  try {
    fd = openSync('/dev/null', 'w');
  } catch {
    // no /dev/null: the byte is dropped unlogged
  }
  const log = fd === null ? null : new CappedLog(fd, LIMITS.streamCapBytes, []);
  try {
    return await createFifoPipesAhead(state, count, (bytes, n) => {
      log?.push(bytes, n);
      return true;
    });
  } finally {
    log?.end();
    if (fd !== null) closeSync(fd);
  }
}

/** The resident's lines on this supervisor's stdin, read by every awaitHandover (its 64 KiB buffer allocated once). */
let stdin: LineReader | undefined;

/** Lines read from a file descriptor, blocking (no event loop runs while a warm supervisor waits). */
class LineReader {
  private rest = Buffer.alloc(0);
  private readonly buf = Buffer.allocUnsafe(64 * 1024);

  constructor(private readonly fd: number) {}

  /** The next line; null at end of file before one. */
  next(): string | null {
    for (;;) {
      const nl = this.rest.indexOf(10);
      if (nl >= 0) {
        const line = this.rest.subarray(0, nl).toString('utf8');
        this.rest = this.rest.subarray(nl + 1);
        return line;
      }
      let n: number;
      try {
        n = readSync(this.fd, this.buf, 0, this.buf.length, null);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return null;
        // A non-blocking stdin: wait a little without an event loop.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
        continue;
      }
      if (n === 0) return null;
      this.rest = Buffer.concat([this.rest, this.buf.subarray(0, n)]);
    }
  }
}

/** Reserves left by warm supervisors that were killed while they waited (their pid is gone). */
function removeOrphanedReserves(state: string): void {
  let names: string[];
  try {
    names = readdirSync(state);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = RESERVE_NAME.exec(name)?.[1];
    if (pid !== undefined && !existsSync(`/proc/${pid}`)) removeFileQuietly(join(state, name));
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
