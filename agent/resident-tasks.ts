// The resident agent's `start` and `exec`. Every command whose output must outlive the resident
// runs under a detached supervisor from its first byte: the resident never reads such output
// itself, since a read(2) takes bytes out of the pipe and a SIGKILL before the log write(2) would
// lose them (node has no non-consuming read; docs/protocol.md). So a start is `agent.cjs call
// start`'s own startTask, and a promotable exec is a start under the id the host made, which the
// resident waits on for `promote.after_ms`: ended in time, its result is read from the task's logs
// and the task removed (nobody was told its id); still running, the task is the answer. A plain
// exec (no promotion) is read by the resident itself (exec-run.ts): nothing durable is promised.
import { openSync, readSync, closeSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LIMITS } from '../shared/limits.js';
import { OutputCapture, type OutputSink } from '../shared/output-capture.js';
import type { AgentRequest, ExecFinished, ExecResult, TaskView } from '../shared/protocol.js';
import type { RequestContext, ResidentServices } from './call.js';
import { AgentFailure } from './errors.js';
import { runPlainExec, type PlainExec } from './exec-run.js';
import { cancelTask } from './ops/cancel.js';
import { getTask } from './ops/get.js';
import { removeTask } from './ops/remove.js';
import { spawnSupervisor, startNewTask, startTask, type StartedTask, type StartOpts } from './ops/start.js';
import { homeDir, taskDir, TASK_FILES } from './paths.js';
import { refuseWithoutRoom } from './process-count.js';
import { mayEnter } from './run-as.js';
import { readTail, taskOutcome, type TaskOutcome } from './task-view.js';
import { agentBaseEnv } from './task-env.js';
import type { Timings } from './timing.js';
import { WarmSupervisor } from './warm-supervisor.js';

type StartRequest = Extract<AgentRequest, { op: 'start' }>;
type ExecRequest = Extract<AgentRequest, { op: 'exec' }>;

/** Offsets at the log cap read nothing: a wait on them answers only when the state changes. */
const NOTHING = LIMITS.streamCapBytes;
/** A view of the state alone. */
const STATUS_ONLY = { stdoutOffset: NOTHING, stderrOffset: NOTHING, limit: 1 };
/** One wait's longest slice, so that a caller giving up is noticed soon. */
const WAIT_SLICE_MS = 1000;

/** A promotable exec this resident waits on: `isKept` once someone else cancelled it (they read the outcome). */
interface Waiting {
  isKept: boolean;
}

/** The resident's services (see call.ts's ResidentServices). */
export class ResidentTasks implements ResidentServices {
  /** Every resident can promote: the supervisor that start uses runs wherever start does. */
  readonly isPromotable = true;
  /** Promotable execs being waited on, by task id. */
  private readonly waiting = new Map<string, Waiting>();
  /** The supervisor booted ahead of the next start or promotable exec. */
  private readonly warm: WarmSupervisor;

  constructor(timings: Timings) {
    this.warm = new WarmSupervisor(spawnSupervisor, timings.warmIdleMs, timings.warmQuietMs);
  }

  /** Every request frame, as it arrives: a supervisor's boot waits for them to pause. */
  noteRequest(): void {
    this.warm.noteRequest();
  }

  /** True while a call waits on a promotable exec. */
  get isBusy(): boolean {
    return this.waiting.size > 0;
  }

  start(req: StartRequest, ctx: RequestContext): Promise<TaskView> {
    const room = refuseWithoutRoom(req.bounds);
    const bounds = room ? { processes: room.processes, openFiles: room.open_files, oomScoreAdj: room.oom_score_adj } : undefined;
    const opts: StartOpts = {
      taskId: req.task_id,
      command: req.command,
      timeoutS: req.timeout_s,
      stdin: req.stdin,
      env: commandEnvOf(req),
      ...(req.cwd !== undefined ? { cwd: req.cwd } : {}),
      ...(bounds ? { bounds } : {}),
      ...(req.run_as ? { runAs: req.run_as } : {}),
      ...(req.remove_file !== undefined ? { removeFile: req.remove_file } : {}),
    };
    this.bootNextAfter(ctx);
    return startTask(opts, ctx.timings, this.warm.launch);
  }

  /**
   * After a start, whose supervisor stays with its task while it runs: boots one for the next once
   * this call is answered and requests pause. A promotable exec boots none ahead: its supervisor
   * is free again once the command ends (WarmSupervisor), and one is booted when none is.
   */
  private bootNextAfter(ctx: RequestContext): void {
    if (ctx.afterAnswer) ctx.afterAnswer(() => this.warm.prepareWhenQuiet());
    else this.warm.prepare();
  }

  async exec(req: ExecRequest, ctx: RequestContext): Promise<ExecResult> {
    const env = commandEnvOf(req);
    const home = env.HOME ?? homeDir() ?? '/';
    const cwd = req.cwd === undefined ? home : resolve(home, req.cwd);
    if (!isDirectory(cwd)) throw new AgentFailure('cwd_not_found', 'field `cwd` is not an existing directory');
    // The user's command: as its shell's `cd` would, a directory it may not enter is not found.
    if (req.run_as && !mayEnter(cwd, req.run_as))
      throw new AgentFailure('cwd_not_found', 'field `cwd` is not a directory the command may enter (`run_as`)');
    const bounds = refuseWithoutRoom(req.bounds);
    const plain: PlainExec = {
      command: req.command,
      cwd,
      env,
      timeoutMs: req.timeout_ms,
      maxOutputBytes: req.max_output_bytes,
      stdin: req.stdin_b64 !== undefined ? Buffer.from(req.stdin_b64, 'base64') : undefined,
      bounds,
      killGraceMs: req.kill_grace_ms ?? 0,
      reapsGroup: req.reap_group ?? false,
      ...(req.run_as ? { runAs: req.run_as } : {}),
      ...(req.remove_file !== undefined ? { removeFile: req.remove_file } : {}),
    };
    const promote = req.promote;
    // On the cleanup reserve (leftovers fill the commands' share) a supervisor would take a
    // process the command needs: the call waits, as without promotion.
    const isOnReserve = bounds !== undefined && bounds.processes !== req.bounds?.processes;
    if (!promote || plain.stdin || isOnReserve) return runPlainExec(plain, ctx.signal);
    const taskId = promote.task_id;
    // An id already waited on here is refused before its entry could be replaced (startNewTask
    // refuses any other existing one).
    if (this.waiting.has(taskId)) throw existingTaskId();
    const waiting: Waiting = { isKept: false };
    this.waiting.set(taskId, waiting);
    try {
      let started: StartedTask | null;
      try {
        const jobBounds = bounds
          ? { processes: bounds.processes, openFiles: bounds.open_files, oomScoreAdj: bounds.oom_score_adj }
          : undefined;
        started = await startNewTask(
          {
            taskId,
            command: req.command,
            cwd,
            timeoutS: Math.ceil(req.timeout_ms / 1000),
            stdin: false,
            env,
            ...(jobBounds ? { bounds: jobBounds } : {}),
            reapsGroup: req.reap_group ?? false,
            ...(req.run_as ? { runAs: req.run_as } : {}),
            ...(req.remove_file !== undefined ? { removeFile: req.remove_file } : {}),
          },
          ctx.timings,
          this.warm.launch,
        );
      } catch (err) {
        // No slot left among the task directories, or no room to record a task (a full disk, which
        // the next command may be meant to clean up), or no process for its supervisor (the command
        // alone may fit; if not, its spawn fails as out_of_processes): the call waits, as without promotion.
        if (err instanceof AgentFailure && (err.code === 'task_limit' || err.code === 'state_dir_full' || err.code === 'out_of_processes'))
          return runPlainExec(plain, ctx.signal);
        throw err;
      }
      if (!started) throw existingTaskId();
      // Nothing of the logs yet: an ended task's answer reads them whole, a running one's the first page (awaitEnd).
      const first = taskOutcome(started.observed);
      const view = await awaitEnd(taskId, first, Date.now() + promote.after_ms, ctx);
      if (isNeverRun(view)) {
        // Its command never started: nor a task, then. Run plain, one process may still fit (if
        // not, its spawn fails as out_of_processes: an error of the call, never an exit code null).
        await removeTask(taskId, ctx.timings).catch(() => undefined);
        return runPlainExec(plain, ctx.signal);
      }
      // Only a view read again (awaitEnd) can still run: it is a whole one.
      if (view.state === 'running' || view.state === 'unknown') return { kind: 'promoted', task: view as TaskView };
      const result = finishedResult(taskId, view, req.max_output_bytes);
      // Nobody was told the id, unless someone else cancelled it (through this resident, or a
      // per-call agent: a cancel our caller did not ask for): once the answer is out, the task goes.
      const isCancelledElsewhere = view.state === 'cancelled' && ctx.signal?.aborted !== true;
      if (!waiting.isKept && !isCancelledElsewhere) {
        // Its final status was read here, and its supervisor is ours to watch: the removal waits for it to leave, then deletes.
        const ended = { supervisor: started.supervisor };
        const tidy = (): void => void removeTask(taskId, ctx.timings, ended).catch(() => undefined);
        if (ctx.afterAnswer) ctx.afterAnswer(tidy);
        else tidy();
      }
      return result;
    } finally {
      this.waiting.delete(taskId);
    }
  }

  /** Whoever cancels an exec being waited on reads its outcome: its task stays, even though the caller never learns its id. */
  noteCancel(taskId: string): void {
    const waiting = this.waiting.get(taskId);
    if (waiting) waiting.isKept = true;
  }
}

/**
 * Waits until the task ends, `untilMs` passes, or the caller gives up. A caller that cancelled
 * stops the command (as without promotion) and gets its end; one that went away (the server's
 * connection is gone) leaves it running as a task.
 */
async function awaitEnd(taskId: string, started: TaskOutcome, untilMs: number, ctx: RequestContext): Promise<TaskOutcome | TaskView> {
  // Already ended (a quick command): its status is all the answer needs (finishedResult reads the
  // logs). `started` shows no page of them: a task still running (or unknown) is read again below.
  if (started.state !== 'running' && started.state !== 'unknown') return started;
  const page0 = { stdoutOffset: 0, stderrOffset: 0, limit: LIMITS.pageDefaultBytes };
  let state: TaskView['state'] = started.state;
  while (state === 'running') {
    if (ctx.signal?.aborted) {
      if (ctx.signal.reason === 'disconnected') break;
      return cancelTask({ taskId, ...page0 }, ctx.timings);
    }
    const leftMs = untilMs - Date.now();
    if (leftMs <= 0) break;
    const waitS = Math.min(leftMs, WAIT_SLICE_MS) / 1000;
    state = (await getTask({ taskId, ...STATUS_ONLY, waitS }, ctx.timings)).state;
  }
  // Still running: the promoted answer shows the first page of each log. Ended: the status alone.
  const pages = state === 'running' || state === 'unknown' ? page0 : STATUS_ONLY;
  return getTask({ taskId, ...pages, waitS: 0 }, ctx.timings);
}

/** The command's environment a request asks for (see the protocol's `env` and `inherit_env`). */
function commandEnvOf(req: { env?: Record<string, string> | undefined; inherit_env?: boolean | undefined }): NodeJS.ProcessEnv {
  if (req.env === undefined) return agentBaseEnv();
  return req.inherit_env ? { ...agentBaseEnv(), ...req.env } : { ...req.env };
}

function existingTaskId(): AgentFailure {
  return new AgentFailure('invalid_request', 'field `promote.task_id` names an existing task');
}

/**
 * A task whose command never started (nothing runs twice if it is run again): its supervisor
 * refused it for a full state directory, or no process could be made for it or its command
 * (out_of_processes). Not any `spawn_failed`: a hand-over that failed (EPIPE: the warm supervisor
 * died as the task came) says nothing of the shell started ahead, which is given the command in
 * the same turn (warm-supervisor.ts handOver) and may have run it.
 */
function isNeverRun(view: TaskOutcome): boolean {
  const code = view.error?.code;
  return view.state === 'failed' && view.started_at === null && (code === 'state_dir_full' || code === 'out_of_processes');
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** An exec's answer from its ended task: each log's head and tail within `capBytes`, the exit status, whether it timed out. */
function finishedResult(taskId: string, view: TaskOutcome, capBytes: number): ExecFinished {
  const dir = taskDir(taskId);
  const out = captureStream(dir, 'stdout', capBytes, view.stdout_truncated);
  const err = captureStream(dir, 'stderr', capBytes, view.stderr_truncated);
  return {
    kind: 'finished',
    exit_code: view.exit_code,
    timed_out: view.state === 'timed_out',
    stdout_b64: out.data.toString('base64'),
    stderr_b64: err.data.toString('base64'),
    stdout_truncated: out.isTruncated || view.stdout_truncated,
    stderr_truncated: err.isTruncated || view.stderr_truncated,
    stdout_head_bytes: out.splitAt,
    stderr_head_bytes: err.splitAt,
    ...(isOutputLost(view) ? { output_lost: view.error!.message } : {}),
  };
}

/** True when the task's logs end early because they could not be written (its error says where and why). */
function isOutputLost(view: TaskOutcome): boolean {
  return view.error?.code === 'state_dir_full' || view.error?.code === 'log_write_failed';
}

/**
 * A stream's bytes as an exec's head-and-tail capture keeps them: from its log, or, where the log
 * was capped (`isCapped`, as its status says) and the supervisor kept the stream's end, the log's
 * head and that end (at most LIMITS.streamTailBytes of it) with the gap between them marked.
 */
function captureStream(dir: string, stream: 'stdout' | 'stderr', capBytes: number, isCapped: boolean): Captured {
  const log = join(dir, stream === 'stdout' ? TASK_FILES.stdout : TASK_FILES.stderr);
  const headCap = Math.ceil(capBytes / 2);
  // Only a capped log has a kept end: no file to look for otherwise.
  const tail = isCapped ? readTail(dir, stream, capBytes - headCap) : null;
  if (!tail) return captureLog(log, capBytes);
  // Capped, the log holds far more than any result's head.
  const head = readHead(log, headCap);
  return { data: Buffer.concat([head, tail]), isTruncated: true, splitAt: head.length };
}

/** What an exec's answer takes of a capture. */
type Captured = Pick<OutputSink, 'data' | 'isTruncated' | 'splitAt'>;

/** The first (at most) `maxBytes` bytes of a file; none if it cannot be read. */
function readHead(path: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return Buffer.alloc(0);
  }
  try {
    const buf = Buffer.allocUnsafe(maxBytes);
    let got = 0;
    while (got < maxBytes) {
      const n = readSync(fd, buf, got, maxBytes - got, got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}

/** A log's bytes through an exec's head-and-tail capture. */
function captureLog(path: string, capBytes: number): OutputCapture {
  const capture = new OutputCapture(capBytes);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return capture;
  }
  try {
    for (;;) {
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      capture.push(chunk.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return capture;
}
