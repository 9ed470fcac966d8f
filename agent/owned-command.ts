// A command the resident agent runs itself as a task (a `start`, or an `exec` that may be promoted):
// no supervisor process while it owns it. The task directory is claimed by the caller; this
// module fills it in and runs the command under the job wrapper (job-wrapper.ts), then either
// sees it through to the end — the logs, the final status, and `release` to the wrapper — or lets
// go of it (handOver: at the end of a `start`'s settle window, at an exec's promotion, when the
// resident stops), after which the wrapper starts the supervisor that adopts it.
// Durability: every byte read is written to the task's log at once (masked, capped); what the
// masker holds back between reads is saved beside the log (.held-stdout, .held-stderr), and the
// rest waits in the pipe, held by the wrapper. So a resident that hands over loses nothing, and
// one killed -9 loses nothing but what it had just read: the kernel closes its socket to the
// wrapper, and the adopter goes on from the files. The exception, measured (a kill between a
// read(2) and its log write(2) loses that read's bytes; a stale hold may repeat or lose them): a
// read takes bytes out of the pipe, and node offers no non-consuming one (docs/protocol.md).
import type { ChildProcess } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { LIMITS } from '../shared/limits.js';
import { OutputCapture } from '../shared/output-capture.js';
import { jobBoundsText } from '../shared/job-bounds.js';
import type { Bounds } from '../shared/protocol.js';
import { STATUS_FORMAT_VERSION, type TaskStatus, type TerminationReason } from '../shared/status.js';
import { CappedLog } from './capped-log.js';
import { drainFd, type FifoPipe, type PipeReader } from './drain-pipes.js';
import { debug } from './errors.js';
import type { FifoPool } from './fifo-pool.js';
import { isNoSpaceError, stateDirFull } from './no-space.js';
import { childProcess } from './node-modules.js';
import { TASK_FILES } from './paths.js';
import { hasLiveGroupMembers, readProcStat, signalGroup } from './proc.js';
import { removeFileQuietly } from './remove-file.js';
import { hasCancelRequest, OWNED_FILES, writeHeld } from './owned-files.js';
import { secretValuesFromEnv, type MaskerState } from './secret-masker.js';
import { writeStatus } from './status-file.js';
import { createStatusReserve, writeFinalStatus } from './status-reserve.js';
import { finalState, logWriteError } from './supervisor.js';
import { sleep, type Timings } from './timing.js';
import { WRAPPER_SHELL, wrapperScript } from './job-wrapper.js';

/** What the resident needs from its own set-up to run a command. */
export interface OwnerEnv {
  pool: FifoPool;
  timings: Timings;
  /** The resident itself, recorded as the task's owner. */
  self: { pid: number; start_time: number };
  /** Shell text that execs the adopting supervisor for the task in `dir` (run by the wrapper). */
  adopterCommand(dir: string): string;
}

/** One command to run in a claimed task directory (request.json written). */
export interface OwnedLaunch {
  dir: string;
  taskId: string;
  command: string;
  /** An existing directory. */
  cwd: string;
  /** The command's whole environment. */
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  /** A stdin FIFO that `input` feeds (else /dev/null). */
  stdin: boolean;
  bounds: Bounds | undefined;
  /** An exec's result: keep each stream's head and tail within this many bytes (unmasked; the host masks). */
  captureBytes?: number;
  /** An exec nobody was told the id of: finished in time, its directory goes (the caller removes it, then release()). */
  isEphemeral: boolean;
  /** An exec that ends in time stops what it left in its group too (as a task always does; see the protocol's reap_group). */
  reapsGroup?: boolean;
}

/** How the resident's part ended: it saw the command finish, or it let go of it. */
export type OwnedEnd =
  { kind: 'finished'; status: TaskStatus; stdout: OutputCapture | null; stderr: OutputCapture | null } | { kind: 'handed_over' };

/** After an exec's command ended in time, how long its background processes may keep its pipes open: the fast path's grace. */
const CALL_DRAIN_GRACE_MS = 100;

/** No FIFO could be made (mkfifo missing): the caller runs the task the classic way. */
export class NoFifosError extends Error {}

/** Shared read buffer of every owned command (each callback completes before the next read). */
const READ_BUFFER = Buffer.allocUnsafe(64 * 1024);

const nowS = () => Math.floor(Date.now() / 1000);

/** A command the resident runs, from spawn to the end of its ownership. */
export class OwnedCommand {
  /** Resolves once the resident's part is over; never rejects. */
  readonly ended: Promise<OwnedEnd>;
  private resolveEnded!: (end: OwnedEnd) => void;
  private readonly status: TaskStatus;
  private readonly logs: [CappedLog, CappedLog];
  private readonly logFds: number[];
  private readonly captures: [OutputCapture, OutputCapture] | null;
  private readonly held: [MaskerState | null, MaskerState | null] = [null, null];
  private readers: PipeReader[] = [];
  private openStreams = 2;
  private streamsEnded: () => void = () => {};
  private readonly streamsDone: Promise<void>;
  private wrapper!: ChildProcess;
  private notify!: Socket;
  private pgid = 0;
  private exitCode: number | null | undefined = undefined;
  private isTermSent = false;
  private isHandedOver = false;
  /** An ephemeral command's directory stays after all (see keep()). */
  private isEphemeral: boolean;
  private wasKept = false;
  private isFinishing = false;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private killTimer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly launch: OwnedLaunch,
    private readonly owner: OwnerEnv,
  ) {
    this.ended = new Promise((resolve) => (this.resolveEnded = resolve));
    this.isEphemeral = launch.isEphemeral;
    this.streamsDone = new Promise((resolve) => {
      this.streamsEnded = () => {
        if (--this.openStreams === 0) resolve();
      };
    });
    const startedAtMs = Date.now();
    this.status = {
      format: STATUS_FORMAT_VERSION,
      task_id: launch.taskId,
      state: 'running',
      reason: null,
      supervisor: null,
      group: null,
      exit_code: null,
      signal: null,
      started_at: Math.floor(startedAtMs / 1000),
      finished_at: null,
      stdout_truncated: false,
      stderr_truncated: false,
      resident: owner.self,
      wrapper: null,
      deadline_at_ms: startedAtMs + launch.timeoutMs,
    };
    const secrets = secretValuesFromEnv(launch.env);
    this.logFds = [];
    try {
      for (const name of [TASK_FILES.stdout, TASK_FILES.stderr]) this.logFds.push(openSync(join(launch.dir, name), 'w', 0o600));
    } catch (err) {
      this.closeLogs();
      throw isNoSpaceError(err) ? stateDirFull() : err;
    }
    this.logs = [
      new CappedLog(this.logFds[0]!, LIMITS.streamCapBytes, secrets),
      new CappedLog(this.logFds[1]!, LIMITS.streamCapBytes, secrets),
    ];
    this.captures =
      launch.captureBytes !== undefined ? [new OutputCapture(launch.captureBytes), new OutputCapture(launch.captureBytes)] : null;
  }

  /**
   * Starts `launch`'s command. Throws before anything runs: `state_dir_full` when the task cannot
   * be recorded, NoFifosError when no FIFO can be made, or a spawn failure.
   */
  static start(launch: OwnedLaunch, owner: OwnerEnv): OwnedCommand {
    if (!createStatusReserve(launch.dir)) throw stateDirFull();
    const cmd = new OwnedCommand(launch, owner);
    try {
      cmd.spawn();
    } catch (err) {
      cmd.closeLogs();
      throw err;
    }
    return cmd;
  }

  /**
   * Makes an ephemeral command an ordinary task: if it ends while we own it, its final status is
   * written and its directory stays (the caller that would have removed it went away).
   */
  keep(): void {
    if (!this.isEphemeral) return;
    this.isEphemeral = false;
    this.wasKept = true;
  }

  /** True when keep() made an ephemeral command an ordinary task. */
  get isKept(): boolean {
    return this.wasKept;
  }

  /** True once the command's exit status is known. */
  get hasExited(): boolean {
    return this.exitCode !== undefined;
  }

  // --- start-up ---------------------------------------------------------------------------------

  private spawn(): void {
    const { launch, owner } = this;
    const pipes: FifoPipe[] = [];
    let stdinRead: number | null = null;
    let stdinWrite: number | null = null;
    const closeAll = () => {
      for (const p of pipes) closeQuietly(p.readFd, p.writeFd);
      closeQuietly(stdinRead, stdinWrite);
    };
    try {
      for (let i = 0; i < 2; i++) {
        const pipe = owner.pool.openPipe();
        if (!pipe) throw new NoFifosError();
        pipes.push(pipe);
      }
      if (launch.stdin) {
        const path = join(launch.dir, TASK_FILES.stdin);
        if (!owner.pool.take(path)) throw new NoFifosError();
        stdinRead = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
        stdinWrite = openSync(path, constants.O_WRONLY);
      }
    } catch (err) {
      closeAll();
      throw err;
    }
    const [out, err] = pipes as [FifoPipe, FifoPipe];
    let child: ChildProcess;
    try {
      child = childProcess().spawn(
        WRAPPER_SHELL,
        [
          '-c',
          wrapperScript(launch.bounds ? jobBoundsText(boundsOf(launch.bounds)) : ''),
          'sandbox-task',
          launch.command,
          owner.adopterCommand(launch.dir),
        ],
        {
          cwd: launch.cwd,
          env: launch.env,
          detached: true, // a session of its own: nothing of the resident's reaches it, nor it the resident
          stdio: [stdinRead ?? 'ignore', out.writeFd, err.writeFd, 'pipe', out.readFd, err.readFd, stdinWrite ?? 'ignore'],
        },
      );
    } finally {
      // Only the wrapper and the command hold the write ends and the stdin ends from here on.
      closeQuietly(out.writeFd, err.writeFd, stdinRead, stdinWrite);
    }
    if (child.pid === undefined) {
      closeQuietly(out.readFd, err.readFd);
      removeFileQuietly(join(launch.dir, TASK_FILES.stdin));
      throw new Error('spawn failed');
    }
    this.wrapper = child;
    child.on('error', () => {});
    const self = readProcStat(child.pid);
    this.status.wrapper = { pid: child.pid, start_time: self?.startTime ?? 0 };
    this.notify = child.stdio[3] as Socket;
    this.listenToWrapper();
    this.readers = [out, err].map((pipe, i) =>
      drainFd(
        pipe.readFd,
        READ_BUFFER,
        (bytes, n) => {
          this.take(i, bytes, n);
          return true;
        },
        this.streamsEnded,
      ),
    );
    this.timeoutTimer = setTimeout(() => this.requestStop('timeout'), launch.timeoutMs);
  }

  /** The wrapper's lines: `pid N` once the command runs, `exit N` once it ended. */
  private listenToWrapper(): void {
    let text = '';
    this.notify.on('error', () => {});
    this.notify.on('data', (b: Buffer) => {
      text += b.toString('latin1');
      for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n')) {
        const line = text.slice(0, nl);
        text = text.slice(nl + 1);
        const m = /^(pid|exit) (\d+)$/.exec(line);
        if (m?.[1] === 'pid') this.onJobStarted(Number(m[2]));
        else if (m?.[1] === 'exit') this.onJobExited(Number(m[2]));
      }
    });
    // The wrapper is gone without saying how the command ended (killed from inside the sandbox).
    this.notify.on('end', () => {
      if (!this.hasExited && !this.isHandedOver) this.onJobExited(null);
    });
  }

  private onJobStarted(pgid: number): void {
    if (this.pgid || this.isHandedOver) return;
    this.pgid = pgid;
    this.status.group = { pgid, leader_start_time: readProcStat(pgid)?.startTime ?? 0 };
    if (!this.writeProgress()) {
      // A task nobody can see or cancel must not run.
      signalGroup(pgid, 'SIGKILL');
      this.status.reason ??= 'supervisor_error';
      this.status.error = STATE_DIR_FULL_AT_START;
    }
    if (this.status.reason !== null) this.terminateGroup();
  }

  // --- output -------------------------------------------------------------------------------------

  private take(i: number, bytes: Buffer, n: number): void {
    if (this.captures && n > 0) this.captures[i]!.push(Buffer.from(bytes.subarray(0, n)));
    const log = this.logs[i]!;
    const wasTruncated = log.isTruncated;
    log.push(bytes, n);
    this.saveHeld(i);
    if (!wasTruncated && log.isTruncated) {
      if (i === 0) this.status.stdout_truncated = true;
      else this.status.stderr_truncated = true;
      this.writeProgress();
    }
  }

  /** Saves what log `i`'s masker holds back when that changed (rare: only output that may begin a secret). */
  private saveHeld(i: number): void {
    const state = this.logs[i]!.maskerState;
    const previous = this.held[i]!;
    const isHolding = state.pending !== null && state.pending.length > 0;
    if (!isHolding && previous === null) return;
    if (isHolding && previous !== null && previous.covered === state.covered && previous.pending!.equals(state.pending!)) return;
    writeHeld(this.launch.dir, i, state);
    this.held[i] = isHolding ? { pending: Buffer.from(state.pending!), covered: state.covered } : null;
  }

  // --- stopping -------------------------------------------------------------------------------------

  /** Records the first termination reason and starts TERM -> KILL on the group (once it exists). */
  requestStop(reason: TerminationReason): void {
    if (this.status.reason !== null || this.hasExited || this.isHandedOver) return;
    this.status.reason = reason;
    clearTimeout(this.timeoutTimer);
    if (!this.pgid) return; // onJobStarted stops the group once there is one
    this.writeProgress();
    this.terminateGroup();
  }

  private terminateGroup(): void {
    if (this.isTermSent || !this.pgid) return;
    this.isTermSent = true;
    const pgid = this.pgid;
    signalGroup(pgid, 'SIGTERM');
    signalGroup(pgid, 'SIGCONT');
    this.killTimer = setTimeout(() => signalGroup(pgid, 'SIGKILL'), this.owner.timings.graceMs);
  }

  // --- the end ------------------------------------------------------------------------------------

  private onJobExited(code: number | null): void {
    if (this.hasExited || this.isHandedOver) return;
    this.exitCode = code;
    clearTimeout(this.timeoutTimer);
    this.finish().catch((err: unknown) => {
      // Whatever went wrong, the wrapper's adopter can still record the outcome: let go.
      debug(`finishing failed: ${String(err)}`);
      this.closeLogs();
      this.notify.destroy();
      this.resolveEnded({ kind: 'handed_over' });
    });
  }

  /** The command ended while we own it: stop what is left of its group, drain, record, release. */
  private async finish(): Promise<void> {
    this.isFinishing = true;
    const { timings } = this.owner;
    // An exec that ended in time is a call, not a task: what it left running in the background
    // (`server &`) goes on, and its pipes get the fast path's short grace. A task's group ends with it.
    const isCall = this.isEphemeral && this.status.reason === null && !this.launch.reapsGroup;
    if (this.pgid && !isCall) {
      const giveUpAt = Date.now() + timings.graceMs + 1000;
      while (hasLiveGroupMembers(this.pgid) && Date.now() < giveUpAt) {
        this.terminateGroup();
        await sleep(Math.min(timings.pollMs, 10));
      }
      clearTimeout(this.killTimer);
      if (hasLiveGroupMembers(this.pgid)) signalGroup(this.pgid, 'SIGKILL');
    }
    // A process that escaped the group (setsid), or a call's background one, may hold the pipes: the wait is bounded.
    await Promise.race([this.streamsDone, sleep(isCall ? CALL_DRAIN_GRACE_MS : timings.drainMs)]);
    for (const r of this.readers) r.destroy();
    this.status.reason ??= hasCancelRequest(this.launch.dir) ? 'cancel' : 'exit';
    const s = this.status;
    s.exit_code = this.exitCode ?? null;
    s.state = finalState(s.reason, s.exit_code);
    if (this.exitCode === null && s.reason === 'exit') {
      s.state = 'failed';
      s.error = WRAPPER_LOST;
    }
    s.finished_at = nowS();
    s.resident = null;
    for (const log of this.logs) log.end();
    s.stdout_truncated = this.logs[0].isTruncated;
    s.stderr_truncated = this.logs[1].isTruncated;
    const writeError = logWriteError(this.logs);
    if (writeError && !s.error) s.error = writeError;
    this.closeLogs();
    // Cancelled from another process, which will read the outcome: the directory stays.
    if (this.isEphemeral && s.reason === 'cancel' && hasCancelRequest(this.launch.dir)) this.keep();
    if (this.isEphemeral) {
      // The caller answers, removes the directory, then calls release().
      this.resolveEnded({ kind: 'finished', status: s, stdout: this.captures?.[0] ?? null, stderr: this.captures?.[1] ?? null });
      return;
    }
    try {
      writeFinalStatus(this.launch.dir, s);
    } catch (err) {
      // The wrapper is not released: the adopter it starts records what it can.
      debug(`final status not written: ${String(err)}`);
      this.notify.destroy();
      this.resolveEnded({ kind: 'handed_over' });
      return;
    }
    for (const file of [TASK_FILES.stdin, TASK_FILES.stdinClosed, ...OWNED_FILES.held, OWNED_FILES.cancelRequest]) {
      removeFileQuietly(join(this.launch.dir, file));
    }
    this.release();
    this.resolveEnded({ kind: 'finished', status: s, stdout: this.captures?.[0] ?? null, stderr: this.captures?.[1] ?? null });
  }

  /** Tells the wrapper the command was seen through: it exits without starting an adopter. */
  release(): void {
    if (this.notify.destroyed) return;
    this.notify.end('release\n');
  }

  /**
   * Lets go of a command still running: stops reading (bytes wait in the pipe), saves what the
   * logs' maskers hold, and closes the socket to the wrapper, which then starts the adopter. False
   * when the command has already ended (its finish is under way: await `ended`).
   */
  handOver(): boolean {
    if (this.isHandedOver) return true;
    if (this.hasExited || this.isFinishing) return false;
    this.isHandedOver = true;
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.killTimer);
    // Detaching closes our read ends at once: no read of ours can follow the adopter's first.
    for (const r of this.readers) r.detach();
    this.saveHeld(0);
    this.saveHeld(1);
    this.status.resident = null;
    this.status.stdout_truncated = this.logs[0].isTruncated;
    this.status.stderr_truncated = this.logs[1].isTruncated;
    this.writeProgress();
    this.closeLogs();
    this.notify.destroy();
    this.wrapper.unref();
    this.resolveEnded({ kind: 'handed_over' });
    return true;
  }

  /** Writes the status so far; false when the filesystem is full. */
  private writeProgress(): boolean {
    try {
      writeStatus(this.launch.dir, this.status);
      return true;
    } catch (err) {
      if (isNoSpaceError(err)) return false;
      throw err;
    }
  }

  private closeLogs(): void {
    for (const fd of this.logFds.splice(0)) closeQuietly(fd);
  }
}

/** The numbers of `bounds` as job-bounds.ts takes them. */
function boundsOf(b: Bounds): { processes: number; openFiles: number; oomScoreAdj: number | null } {
  return { processes: b.processes, openFiles: b.open_files, oomScoreAdj: b.oom_score_adj };
}

function closeQuietly(...fds: (number | null)[]): void {
  for (const fd of fds) {
    if (fd === null) continue;
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
}

const STATE_DIR_FULL_AT_START = {
  code: 'state_dir_full',
  message: "the state directory's filesystem is full: the task could not be recorded, so its command was stopped at once",
};

const WRAPPER_LOST = {
  code: 'wrapper_lost',
  message: "the shell that ran the task's command was killed, so its exit status is unknown",
};
