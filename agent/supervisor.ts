// The per-task supervisor (`agent.cjs supervise <task dir>`), started detached by `start`.
// Like tini, it reads as a script: a linear start-up (read the request, reserve room for the
// final status, open the logs and the stdin pipe, spawn the command in its own process group,
// record `running`), then it waits for the group leader to exit while events do the rest: output
// is masked into capped logs, a timeout or a cancel (SIGTERM to us) escalates TERM -> KILL on the
// group, `input` with eof (SIGUSR2) closes the stdin pipe. Once the leader has exited, the
// remaining group members are stopped (unless the request keeps them: a promotable exec, like a
// plain run_command, leaves `cmd &` running), the pipes drained and the final status written. The
// first termination reason wins.
// Every task has one from its first byte, a start through the resident agent too: nothing else
// ever reads a task's output, so no process's death between a read and its log write can lose it.
import type { ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, writeSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { LIMITS } from '../shared/limits.js';
import { initialStatus, type TaskStatus, type TerminationReason } from '../shared/status.js';
import { CappedLog } from './capped-log.js';
import {
  closeQuietly,
  createFifoPipes,
  discardRestWithCat,
  drainFd,
  keepRestWithTail,
  type FifoPipe,
  type PipeReader,
} from './drain-pipes.js';
import { debug, spawnErrorCode } from './errors.js';
import { closeInheritedFds } from './inherited-fds.js';
import { fullFilesystemText, isNoSpaceError } from './no-space.js';
import { childProcess } from './node-modules.js';
import { TASK_FILES } from './paths.js';
import { jobBoundsText, type JobBounds } from '../shared/job-bounds.js';
import { discardPendingShell, type PendingShell, type Shells } from './pending-shell.js';
import { spawnIds } from './run-as.js';
import { hasLiveGroupMembers, readProcStat, signalGroup } from './proc.js';
import type { ProcStat } from '../shared/proc-stat.js';
import { removeRunFile } from './remove-file.js';
import { secretValuesFromEnv } from './secret-masker.js';
import { writeFileAtomic, writeStatus } from './status-file.js';
import { placeStatusReserve, writeFinalStatus } from './status-reserve.js';
import { openStdinPipe, STDIN_EOF_SIGNAL, type StdinPipe } from './stdin-pipe.js';
import { commandEnv } from './task-env.js';
import { isAsked } from './cancel-mark.js';
import { readTaskRequest, type TaskRequestFile } from './task-request.js';
import { sleep } from './timing.js';

/** Shared read buffer: reads larger than a pipe's capacity (64 KiB by default) never happen. */
const READ_BUFFER_BYTES = 256 * 1024;

/**
 * The command raises its own oom_score_adj to this before it runs, so that under memory pressure
 * the kernel's OOM killer picks a command process over the supervisor that must record its
 * outcome. Only a privileged process may lower a score, so the supervisor cannot protect itself;
 * raising is always allowed. 500, not 1000: memory use still ranks the sandbox's processes, so a
 * large hog elsewhere is still chosen before a task's small shell.
 */
export const COMMAND_OOM_SCORE_ADJ = 500;

/** bash, which commands written for a Linux shell usually expect; /bin/sh where bash is missing. */
export function pickShell(): string {
  for (const candidate of ['/bin/bash', '/usr/bin/bash']) if (existsSync(candidate)) return candidate;
  return '/bin/sh';
}

type TaskError = NonNullable<TaskStatus['error']>;

/** Everything one supervisor knows about its task; the phases below read and update it. */
interface Supervision {
  readonly dir: string;
  readonly req: TaskRequestFile;
  /** A warm supervisor's (the resident's, which it tells of its status writes on stdout: tellRunning). */
  readonly isReusable: boolean;
  /** The command's environment: ours with the task variables applied (see task-env.ts). */
  readonly env: NodeJS.ProcessEnv;
  /** The record written to status.json at each transition, and finally with the outcome. */
  readonly status: TaskStatus;
  /** Output pipes made before the task came (a warm supervisor's); null: made at start-up. */
  readonly madeOutputs: FifoPipe[] | null;
  /** The status reserve made before the task came (a warm supervisor's path); null: made at start-up. */
  readonly madeReserve: string | null;
  /** The shell the resident gave the command to (a warm supervisor's); taken when the command starts, killed if it never does. */
  pending: PendingShell | null;
  /** The command's process group (its leader's pid); 0 until spawned. */
  pgid: number;
  isTermSent: boolean;
  isFinal: boolean;
  killTimer: NodeJS.Timeout | undefined;
  timeoutTimer: NodeJS.Timeout | undefined;
  /** stdout and stderr, in that order; null until opened. */
  logs: readonly [CappedLog, CappedLog] | null;
  logFds: number[];
  stdin: StdinPipe | null;
  /** Readers and helpers draining the command's output, and a promise that both streams ended. */
  drains: { readers: { destroy(): void }[]; helpers: RestHelper[]; ended: Promise<void>; streamEnded: () => void };
}

/** A process draining the rest of a full log's pipe. */
interface RestHelper {
  /** Kills it unless it is done; whatever end of the stream it held is then lost. */
  stop(): void;
}

/** What a warm supervisor made while it waited for its task (warm-supervisor.ts). */
export interface MadeAhead {
  /** The command's stdout and stderr pipes; null: none could be made. */
  outputs: FifoPipe[] | null;
  /** A status reserve to move into the task's directory; null: none was made. */
  reserve: string | null;
  /** The supervisor's own /proc stat (it is the same process before and after its task came); null: not read. */
  self: ProcStat | null;
  /**
   * The command's first process, started ahead for a start like the last one, to which the
   * resident gave this task's command (see pending-shell.ts); null: none, the command is spawned.
   */
  pending: PendingShell | null;
  /** The task's request as the resident wrote it, carried in its hand-over; null: read from the task directory. */
  request: TaskRequestFile | null;
}

/** How the group leader ended. */
interface LeaderExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Where the command's stdin and output go. */
interface CommandStdio {
  stdin: StdinPipe | null;
  /** FIFO pipes for stdout and stderr; null means plain child-process pipes. */
  outputs: FifoPipe[] | null;
}

const nowS = () => Math.floor(Date.now() / 1000);

/**
 * Runs one task to completion. A supervisor the resident may reuse (`isReusable`: a warm one)
 * returns true once the task's final status is written and nothing of it is left in this process
 * (the resident may hand it another task); every other end exits the process, as does every
 * supervisor that is not reusable. A signal meant for an earlier task is told apart by the marks
 * a cancel and an eof leave (cancel-mark.ts).
 */
export async function runSupervisor(
  dir: string,
  env: NodeJS.ProcessEnv = process.env,
  made?: MadeAhead,
  isReusable = false,
): Promise<boolean> {
  // Whoever started us may have leaked descriptors (selftest's caller, say); the command must not
  // hold them. (A warm supervisor closed them before its task came.)
  if (made === undefined) closeInheritedFds();
  const sup = beginSupervision(dir, env, made, isReusable);
  current = sup;
  listenForRequests();
  try {
    await supervise(sup);
  } catch (err) {
    failSupervision(sup, err as Error);
  }
  current = null;
  tasksServed++;
  if (isReusable) return true;
  process.exit(0);
}

/** The task this process supervises now (a reused supervisor has had others before). */
let current: Supervision | null = null;
/** Tasks this process has supervised to their end. */
let tasksServed = 0;
let isListening = false;

/** The task's life, start-up to final status (written when this returns). */
async function supervise(sup: Supervision): Promise<void> {
  // Start-up runs without yielding up to recordRunning: a signal is handled only after that.
  if (!placeStatusReserve(sup.madeReserve, sup.dir)) finish(sup, withReason(sup, 'supervisor_error', STATE_DIR_FULL_AT_START));
  openLogs(sup);
  const stdio = openCommandStdio(sup);
  const child = spawnCommand(sup, stdio);
  if (!child) return new Promise<void>(() => {}); // the spawn failure is recorded (and the process ends) when the child reports it
  recordRunning(sup, child);
  if (sup.isReusable) tellRunning();
  drainOutput(sup, stdio, child);
  armTimeout(sup);
  recordExit(sup, await leaderExit(child));
  // A run_command's `cmd &` outlives it (reap_group false), unless a timeout or cancel stopped it.
  if (sup.req.reap_group !== false || sup.status.reason !== 'exit') await stopRemainingGroup(sup);
  await drainRest(sup);
  recordOutcome(sup);
}

/** The terminal state for a termination reason; the first reason recorded wins. */
export function finalState(reason: TerminationReason | null, exitCode: number | null): TaskStatus['state'] {
  switch (reason) {
    case 'timeout':
      return 'timed_out';
    case 'cancel':
      return 'cancelled';
    case 'exit':
      return exitCode === 0 ? 'succeeded' : 'failed';
    default:
      return 'failed';
  }
}

// --- start-up ---------------------------------------------------------------------------------

function beginSupervision(dir: string, env: NodeJS.ProcessEnv, made: MadeAhead | undefined, isReusable: boolean): Supervision {
  const req = made?.request ?? readTaskRequest(dir);
  const self = made?.self ?? readProcStat(process.pid);
  let streamEnded: () => void = () => {};
  let openStreams = 2;
  const ended = new Promise<void>((resolve) => {
    streamEnded = () => {
      if (--openStreams === 0) resolve();
    };
  });
  return {
    dir,
    req,
    isReusable,
    env: commandEnv(env),
    madeOutputs: made?.outputs ?? null,
    madeReserve: made?.reserve ?? null,
    pending: made?.pending ?? null,
    status: { ...initialStatus(req.task_id), supervisor: self ? { pid: process.pid, start_time: self.startTime } : null },
    pgid: 0,
    isTermSent: false,
    isFinal: false,
    killTimer: undefined,
    timeoutTimer: undefined,
    logs: null,
    logFds: [],
    stdin: null,
    drains: { readers: [], helpers: [], ended, streamEnded },
  };
}

/**
 * `cancel` asks by SIGTERM (the others cover a supervisor stopped by hand); `input` with eof by
 * SIGUSR2. Installed once per process, for whichever task is current. A supervisor that has ended
 * a task before may get a signal meant for that one (sent just before it ended): it acts on the
 * current task only when a cancel or an eof asked for it (cancel-mark.ts) — a signal is no task id.
 */
function listenForRequests(): void {
  if (isListening) return;
  isListening = true;
  const onStop = (): void => {
    const sup = current;
    if (!sup) return;
    if (tasksServed > 0 && !isAsked(sup.dir, 'cancel')) return debug('a stop signal for an earlier task: ignored');
    requestStop(sup, 'cancel');
  };
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, onStop);
  // Installed before the FIFO exists, so no `input` can find a supervisor that would die of the signal.
  process.on(STDIN_EOF_SIGNAL, () => {
    const sup = current;
    if (sup && (tasksServed === 0 || isAsked(sup.dir, 'eof'))) sup.stdin?.close();
  });
  process.on('uncaughtException', (err) => {
    if (current) failSupervision(current, err);
    else process.exit(1);
  });
}

function openLogs(sup: Supervision): void {
  const secrets = secretValuesFromEnv(sup.env);
  sup.logFds = [openSync(join(sup.dir, TASK_FILES.stdout), 'w', 0o600), openSync(join(sup.dir, TASK_FILES.stderr), 'w', 0o600)];
  sup.logs = [
    new CappedLog(sup.logFds[0]!, LIMITS.streamCapBytes, secrets, LIMITS.streamTailBytes),
    new CappedLog(sup.logFds[1]!, LIMITS.streamCapBytes, secrets, LIMITS.streamTailBytes),
  ];
}

function openCommandStdio(sup: Supervision): CommandStdio {
  if (sup.req.stdin === true) {
    sup.stdin = openStdinPipe(sup.dir);
    if (!sup.stdin) debug('no stdin FIFO (mkfifo missing?): the command reads /dev/null');
  }
  const outputs = sup.madeOutputs ?? createFifoPipes(sup.dir, 2);
  if (!outputs) debug('no FIFOs (mkfifo missing?): draining plain child-process pipes');
  return { stdin: sup.stdin, outputs };
}

/** Spawns the command as the leader of a new session and process group; null if that failed (being recorded). */
function spawnCommand(sup: Supervision, stdio: CommandStdio): ChildProcess | null {
  const pending = sup.pending;
  sup.pending = null;
  // Already given the command by the resident (it may have run and ended already: unreaped, since
  // the event loop has not run since the hand-over).
  if (pending) {
    closeOwnEnds(stdio);
    pending.child.on('error', (err) => debug(`child error: ${String(err)}`));
    return pending.child;
  }
  let child: ChildProcess;
  try {
    const [file, args] = commandSpawnArgs(sup.req.bounds, sup.req.command);
    child = childProcess().spawn(file, args, {
      cwd: sup.req.cwd,
      env: sup.env,
      detached: true, // setsid: the command leads its own session and process group
      ...spawnIds(sup.req.run_as),
      stdio: [
        stdio.stdin ? stdio.stdin.readFd : 'ignore',
        stdio.outputs ? stdio.outputs[0]!.writeFd : 'pipe',
        stdio.outputs ? stdio.outputs[1]!.writeFd : 'pipe',
      ],
    });
  } catch (err) {
    finish(sup, withReason(sup, 'supervisor_error', spawnFailed(err)));
  }
  closeOwnEnds(stdio);
  if (child.pid === undefined) {
    child.once('error', (err) => finish(sup, withReason(sup, 'supervisor_error', spawnFailed(err))));
    return null;
  }
  child.on('error', (err) => debug(`child error: ${String(err)}`));
  return child;
}

/** Only the command may hold these ends: EOF on an output must mean the command's side is done, and a reader of stdin held by us would keep `input` from ever seeing the command go away. */
function closeOwnEnds(stdio: CommandStdio): void {
  if (stdio.outputs) for (const p of stdio.outputs) closeSync(p.writeFd);
  if (stdio.stdin) closeSync(stdio.stdin.readFd);
}

/** A pending shell's first process (sh, which execs the command's shell once given the command) and that shell (bash where there is one). */
export function commandShells(): Shells {
  const shell = pickShell();
  return { first: existsSync('/bin/sh') ? '/bin/sh' : shell, command: shell };
}

/**
 * The command's shell's whole `-c` text: the prelude, then the command on the same line. One
 * process, one exec: the prelude used to run in `/bin/sh`, which then exec'd `bash -c COMMAND`
 * (dash's start-up and exec, about 0.5 ms of CPU a command). On the same line, so that the
 * command's line numbers (`$LINENO`, bash's messages) are its own; `:` last, so that the command
 * starts with `$?` 0, as a shell of its own would. What a command can tell: its shell's
 * `$BASH_EXECUTION_STRING` and argv hold the prelude, and a syntax error on its first line
 * quotes it.
 */
export function oneShellCommand(bounds: JobBounds | undefined, command: string): string {
  return commandPrelude(bounds) + ': ; ' + command;
}

/**
 * The kernel's bound on one argument (MAX_ARG_STRLEN, 32 pages, its NUL included). A command
 * that fits alone but not behind the prelude runs as before issue 36: sh runs the prelude and
 * execs `bash -c COMMAND`, the command an argument of its own.
 */
const ARG_MAX_BYTES = 32 * 4096 - 1;

/** How the command's first process is spawned: one shell, or (a command too long for it) sh, then the command's shell. */
export function commandSpawnArgs(bounds: JobBounds | undefined, command: string): [string, string[]] {
  const text = oneShellCommand(bounds, command);
  if (Buffer.byteLength(text) <= ARG_MAX_BYTES) return [pickShell(), ['-c', text]];
  const shells = commandShells();
  return [shells.first, ['-c', commandPrelude(bounds) + 'exec "$@"', 'sandbox-task', shells.command, '-c', command]];
}

/**
 * What the command's first process runs before it becomes the command's shell: the bounds from
 * the request (a start or promotable exec through the resident, whose command must still get its
 * tier's limits; a per-call start gets them from its entry), then its own OOM score raised
 * (inherited by everything it starts; quietly kept as is where the score is higher already).
 */
export function commandPrelude(bounds: JobBounds | undefined): string {
  return (bounds ? jobBoundsText(bounds) : '') + `{ echo ${COMMAND_OOM_SCORE_ADJ} > /proc/self/oom_score_adj; } 2>/dev/null; `;
}

function recordRunning(sup: Supervision, child: ChildProcess): void {
  // The leader cannot have been reaped yet (that needs the event loop), so /proc still has it.
  sup.pgid = child.pid!;
  const leader = readProcStat(sup.pgid);
  sup.status.group = { pgid: sup.pgid, leader_start_time: leader?.startTime ?? 0 };
  sup.status.started_at = nowS();
  if (!writeProgress(sup)) {
    // A task nobody can see, query or cancel must not run: stop it and record why, in the reserve.
    signalGroup(sup.pgid, 'SIGKILL');
    finish(sup, withReason(sup, 'supervisor_error', STATE_DIR_FULL_AT_START));
  }
  if (sup.status.reason !== null) terminateGroup(sup);
}

/**
 * What a reused supervisor writes on its stdout (the resident's pipe) once its task's first status
 * is written: the resident waits for it, and for `free` once the final one is, instead of watching
 * the task's directory (warm-supervisor.ts).
 */
export const RUNNING_LINE = 'running';

/** Tells the resident the first status is written; a resident gone meanwhile hears nothing (the supervisor goes on). */
function tellRunning(): void {
  try {
    writeSync(1, RUNNING_LINE + '\n');
  } catch {
    // its task runs on; the resident (or the next) reads the status file
  }
}

/** Masked output into the capped logs; a full log hands its pipe to `tail -c` (which keeps its end), else `cat > /dev/null`. */
function drainOutput(sup: Supervision, stdio: CommandStdio, child: ChildProcess | null): void {
  const logs = sup.logs!;
  const { readers, helpers, streamEnded } = sup.drains;
  if (!stdio.outputs) {
    if (!child) return;
    [child.stdout!, child.stderr!].forEach((stream, i) => {
      let isEnded = false;
      const end = () => {
        if (!isEnded) {
          isEnded = true;
          streamEnded();
        }
      };
      stream.on('data', (chunk: Buffer) => logs[i]!.push(chunk));
      stream.on('end', end);
      stream.on('error', end);
      stream.on('close', end);
      readers.push(stream);
    });
    return;
  }
  const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  for (const [i, pipe] of stdio.outputs.entries()) {
    let reader: PipeReader | undefined = undefined;
    const log = logs[i]!;
    const handOff = () => {
      const tail = keepRestWithTail(pipe.readFd, log.restKeepBytes);
      if (tail) {
        reader!.detach();
        helpers.push(followTail(tail, log, streamEnded));
        return;
      }
      // No tail: the rest is dropped as before (the log stays truncated, without its end)...
      const helper = discardRestWithCat(pipe.readFd);
      // ...or, with no cat either, read here, where the log keeps its end itself.
      if (!helper) return reader!.resume();
      log.loseRest();
      reader!.detach();
      helpers.push({ stop: () => helper.kill('SIGKILL') });
      helper.once('exit', streamEnded);
    };
    reader = drainFd(
      pipe.readFd,
      buffer,
      (bytes, n) => {
        log.push(bytes, n);
        if (!log.isTruncated) return true;
        // Full (or its disk is), and already losing bytes: nothing more will be written, so pass the pipe on.
        setImmediate(handOff);
        return false;
      },
      streamEnded,
    );
    readers.push(reader);
  }
}

/** The stream's end from a `tail -c` helper into `log`; a helper that fails or is stopped loses it. */
function followTail(helper: ChildProcess, log: CappedLog, streamEnded: () => void): RestHelper {
  let isDone = false;
  helper.stdout!.on('data', (chunk: Buffer) => log.keepRest(chunk));
  helper.on('error', () => log.loseRest());
  // 'close': it exited and its stdout ended, so every byte it kept has been passed on.
  helper.once('close', (code) => {
    isDone = true;
    if (code !== 0) log.loseRest();
    streamEnded();
  });
  return {
    stop: () => {
      if (isDone) return;
      log.loseRest();
      helper.kill('SIGKILL');
    },
  };
}

function armTimeout(sup: Supervision): void {
  const leftMs = sup.req.timeout_s * 1000;
  sup.timeoutTimer = setTimeout(() => requestStop(sup, 'timeout'), Math.max(0, leftMs));
}

// --- stopping -----------------------------------------------------------------------------------

/** Records the first termination reason and starts TERM -> KILL on the group. */
function requestStop(sup: Supervision, reason: TerminationReason): void {
  if (sup.status.reason !== null || sup.isFinal) return;
  sup.status.reason = reason;
  clearTimeout(sup.timeoutTimer);
  if (!sup.pgid) return; // recordRunning stops the group once there is one
  writeProgress(sup);
  terminateGroup(sup);
}

/** TERM to the group (once), and KILL after the grace period unless the group is gone by then. */
function terminateGroup(sup: Supervision): void {
  if (sup.isTermSent || !sup.pgid) return;
  sup.isTermSent = true;
  const pgid = sup.pgid;
  debug(`TERM to group ${pgid}`);
  signalGroup(pgid, 'SIGTERM');
  // A stopped process only acts on TERM once continued.
  signalGroup(pgid, 'SIGCONT');
  sup.killTimer = setTimeout(() => {
    debug(`KILL to group ${pgid}`);
    signalGroup(pgid, 'SIGKILL');
  }, sup.req.grace_ms);
}

function leaderExit(child: ChildProcess): Promise<LeaderExit> {
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

function recordExit(sup: Supervision, exit: LeaderExit): void {
  clearTimeout(sup.timeoutTimer);
  sup.status.exit_code = exit.code ?? (exit.signal ? 128 + (osConstants.signals[exit.signal] ?? 0) : null);
  sup.status.signal = exit.signal;
  if (sup.status.reason === null) sup.status.reason = 'exit';
  debug(`leader exited code=${String(exit.code)} signal=${String(exit.signal)}`);
}

/** Completion, failure and stops alike: nothing of the group may outlive its task. */
async function stopRemainingGroup(sup: Supervision): Promise<void> {
  const giveUpAtMs = Date.now() + sup.req.grace_ms + 1000;
  while (hasLiveGroupMembers(sup.pgid) && Date.now() < giveUpAtMs) {
    terminateGroup(sup);
    await sleep(sup.req.poll_ms);
  }
  clearTimeout(sup.killTimer);
  // A stalled event loop can reach giveUpAtMs before the KILL timer ever ran: whatever is left gets KILL now.
  if (hasLiveGroupMembers(sup.pgid)) {
    debug(`KILL to group ${sup.pgid} after the cleanup deadline`);
    signalGroup(sup.pgid, 'SIGKILL');
  }
}

/** The group is gone; a process that escaped it (setsid) may still hold the pipes open, so the wait is bounded. */
async function drainRest(sup: Supervision): Promise<void> {
  await Promise.race([sup.drains.ended, sleep(sup.req.drain_ms)]);
  for (const r of sup.drains.readers) r.destroy();
  for (const h of sup.drains.helpers) h.stop();
}

// --- the outcome --------------------------------------------------------------------------------

/** Writes a non-final status; false when the filesystem is full (the final status still gets the reserve). */
function writeProgress(sup: Supervision): boolean {
  try {
    writeStatus(sup.dir, sup.status);
    return true;
  } catch (err) {
    if (!isNoSpaceError(err)) throw err;
    debug('state directory full: a progress status was not written');
    return false;
  }
}

/** Records the final status and exits. A failure while finishing exits at once: there is nowhere better to record it. */
function finish(sup: Supervision, error?: TaskError): never {
  recordOutcome(sup, error);
  process.exit(0);
}

/** Records the final status (and closes what the task held); a failure while doing so exits at once. */
function recordOutcome(sup: Supervision, error?: TaskError): void {
  if (sup.isFinal) process.exit(1);
  sup.isFinal = true;
  clearTimeout(sup.timeoutTimer);
  // Ended before its command started (a full state directory, say): the shell started ahead goes.
  if (sup.pending) discardPendingShell(sup.pending);
  const { status } = sup;
  if (sup.logs) {
    // A helper still draining (a failure's early finish) has no end to give.
    for (const h of sup.drains.helpers) h.stop();
    for (const log of sup.logs) log.end();
    status.stdout_truncated = sup.logs[0].isTruncated;
    status.stderr_truncated = sup.logs[1].isTruncated;
    writeTail(sup.dir, TASK_FILES.stdoutTail, sup.logs[0]);
    writeTail(sup.dir, TASK_FILES.stderrTail, sup.logs[1]);
  }
  // run_code's program goes once its command has ended, before the final status says so (whoever
  // sees the end finds it gone). A command that never started leaves it to whoever wrote it.
  if (sup.pgid) removeRunFile(sup.req.remove_file);
  status.state = finalState(status.reason, status.exit_code);
  status.finished_at = nowS();
  const cause = error ?? logWriteError(sup.logs, sup.dir);
  if (cause) status.error = cause;
  try {
    // A reused supervisor keeps its reserve for the next task (moved back where it was made).
    writeFinalStatus(sup.dir, status, sup.isReusable && sup.madeReserve !== null ? sup.madeReserve : undefined);
  } catch (err) {
    // Readers find the supervisor gone and the filesystem full, and say so.
    debug(`final status not written: ${String(err)}`);
    process.exit(1);
  }
  // After the final status: until then, a running task's stdin must still be where `input` looks.
  sup.stdin?.remove();
  for (const fd of sup.logFds) closeQuietly(fd);
  debug(`final state ${status.state}`);
}

/**
 * A capped log's end, masked, next to it, before the final status (a reader that sees the task
 * ended finds it there or never will). Not written, the task reads as without it: truncated.
 */
function writeTail(dir: string, name: string, log: CappedLog): void {
  const tail = log.maskedTail();
  if (!tail) return;
  try {
    writeFileAtomic(join(dir, name), tail);
  } catch (err) {
    debug(`${name} not written: ${String(err)}`);
  }
}

/** Why a log ended early, if a write failed: the outcome stands, the logs are short. */
export function logWriteError(logs: readonly CappedLog[] | null, dir?: string): TaskError | undefined {
  const code = logs?.map((l) => l.writeError).find((c) => c !== null);
  if (!code) return undefined;
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    const where = dir === undefined ? "the state directory's filesystem" : fullFilesystemText(dir);
    return {
      code: 'state_dir_full',
      message: `${where} filled up while the task ran: its output after that was lost (the logs end early, marked truncated); the outcome is the command's own`,
    };
  }
  return {
    code: 'log_write_failed',
    message: `writing the task's logs failed (${code}): they end early (marked truncated); the outcome is the command's own`,
  };
}

/** Anything unexpected: stop the group at once and record a supervisor failure. */
function failSupervision(sup: Supervision, err: Error): void {
  debug(`supervisor error: ${err.stack ?? String(err)}`);
  if (sup.pgid) signalGroup(sup.pgid, 'SIGKILL');
  const error = isNoSpaceError(err)
    ? STATE_DIR_FULL_WHILE_RUNNING
    : { code: 'supervisor_error', message: 'the task supervisor failed; the task was stopped' };
  finish(sup, withReason(sup, 'supervisor_error', error));
}

/** Sets the termination reason unless one was recorded first, and passes the error on. */
function withReason(sup: Supervision, reason: TerminationReason, error: TaskError): TaskError {
  sup.status.reason ??= reason;
  return error;
}

/** The command's spawn failed: `out_of_processes` for want of a process or memory (the start then answers that error), else `spawn_failed`. */
function spawnFailed(err: unknown): TaskError {
  const errno = (err as NodeJS.ErrnoException).code;
  return { code: spawnErrorCode(errno), message: `the command could not be started (${errno ?? 'error'})` };
}

const STATE_DIR_FULL_AT_START: TaskError = {
  code: 'state_dir_full',
  message: "the state directory's filesystem is full: the task could not be recorded, so its command was not run (or was stopped at once)",
};

const STATE_DIR_FULL_WHILE_RUNNING: TaskError = {
  code: 'state_dir_full',
  message: "the state directory's filesystem is full: the supervisor could not go on, so the task was stopped",
};
