// The resident agent's `start` and `exec`: commands it runs itself (owned-command.ts) for as long
// as a call waits on them — a start's settle window, an exec's `promote.after_ms` — and hands over
// to an adopting supervisor beyond that. A start claims its task directory exactly as `agent.cjs
// call start` does (ops/start.ts); a promotable exec claims one too, under the id the host made,
// and removes it once it finished in time (nobody was told that id). Without bash 4 (or FIFOs)
// a start takes the classic way (a supervisor from the start) and an exec is not promotable.
import { existsSync, mkdirSync, readdirSync, renameSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { LIMITS } from '../shared/limits.js';
import type { AgentRequest, ExecFinished, ExecResult, TaskView } from '../shared/protocol.js';
import type { TaskStatus } from '../shared/status.js';
import type { RequestContext, ResidentServices } from './call.js';
import { AgentFailure } from './errors.js';
import { runPlainExec, type PlainExec } from './exec-run.js';
import { FifoPool } from './fifo-pool.js';
import { shellQuote } from './job-wrapper.js';
import { crypto } from './node-modules.js';
import { isNoSpaceError, stateDirFull } from './no-space.js';
import { NoFifosError, OwnedCommand, type OwnedEnd, type OwnerEnv } from './owned-command.js';
import { ensureTasksDir, homeDir, TASK_FILES } from './paths.js';
import { readProcStat } from './proc.js';
import { readStatus } from './status-read.js';
import { nodeRelaunch } from '../shared/agent-runtime.js';
import { refuseWithoutRoom } from './process-count.js';
import { startTask } from './ops/start.js';
import { writeFileAtomic } from './status-file.js';
import { commandEnv } from './task-env.js';
import type { TaskRequestFile } from './task-request.js';
import { buildView, observeTask } from './task-view.js';
import { sleep, type Timings } from './timing.js';

type StartRequest = Extract<AgentRequest, { op: 'start' }>;
type ExecRequest = Extract<AgentRequest, { op: 'exec' }>;

const PAGE_0 = { stdoutOffset: 0, stderrOffset: 0, limit: LIMITS.pageDefaultBytes };

/** The resident's services (see call.ts's ResidentServices). */
export class ResidentTasks implements ResidentServices {
  /** Commands this resident runs right now, by task id. */
  private readonly owned = new Map<string, OwnedCommand>();
  private readonly pool = new FifoPool();
  private readonly self: { pid: number; start_time: number };
  private readonly adopterPrefix: string;

  constructor(readonly isPromotable: boolean) {
    this.self = { pid: process.pid, start_time: readProcStat(process.pid)?.startTime ?? 0 };
    this.adopterPrefix = adopterPrefix();
    if (isPromotable) this.pool.warm();
  }

  /** True while this resident runs a command. */
  get isBusy(): boolean {
    return this.owned.size > 0;
  }

  async start(req: StartRequest, ctx: RequestContext): Promise<TaskView> {
    const room = refuseWithoutRoom(req.bounds);
    const env = commandEnvOf(req);
    const bounds = room ? { processes: room.processes, openFiles: room.open_files, oomScoreAdj: room.oom_score_adj } : undefined;
    const opts = {
      taskId: req.task_id,
      command: req.command,
      timeoutS: req.timeout_s,
      stdin: req.stdin,
      env,
      ...(req.cwd !== undefined ? { cwd: req.cwd } : {}),
      ...(bounds ? { bounds } : {}),
    };
    const runner = this.isPromotable
      ? (dir: string, request: TaskRequestFile) => this.runStart(dir, request, req, env, ctx.timings)
      : undefined;
    return startTask(opts, ctx.timings, runner);
  }

  /** Runs a claimed start for its settle window, then hands it over; false when it cannot run it (no FIFOs). */
  private async runStart(
    dir: string,
    request: TaskRequestFile,
    req: StartRequest,
    env: NodeJS.ProcessEnv,
    timings: Timings,
  ): Promise<boolean> {
    let cmd: OwnedCommand;
    try {
      cmd = OwnedCommand.start(
        {
          dir,
          taskId: req.task_id,
          command: req.command,
          cwd: request.cwd,
          env,
          timeoutMs: req.timeout_s * 1000,
          stdin: req.stdin,
          bounds: req.bounds,
          isEphemeral: false,
        },
        this.ownerEnv(timings),
      );
    } catch (err) {
      if (err instanceof NoFifosError) return false;
      // Nothing ran: leave no directory that would read as a task forever.
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
    this.owned.set(req.task_id, cmd);
    try {
      // A short command is reported finished, a longer one running (handed over), as a classic start does.
      const end = await Promise.race([cmd.ended, sleep(timings.startSettleMs).then(() => null)]);
      if (end === null) {
        cmd.handOver();
        await cmd.ended;
        await adopterRecorded(dir, timings.startReportMs);
      }
    } finally {
      this.owned.delete(req.task_id);
    }
    return true;
  }

  async exec(req: ExecRequest, ctx: RequestContext): Promise<ExecResult> {
    const env = commandEnvOf(req);
    const home = env.HOME ?? homeDir() ?? '/';
    const cwd = req.cwd === undefined ? home : resolve(home, req.cwd);
    if (!isDirectory(cwd)) throw new AgentFailure('cwd_not_found', 'field `cwd` is not an existing directory');
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
    };
    const promote = req.promote;
    // On the cleanup reserve (leftovers fill the commands' share) the wrapper and its watcher would
    // take processes the command needs: the call waits, as without promotion.
    const isOnReserve = bounds !== undefined && bounds.processes !== req.bounds?.processes;
    if (!promote || !this.isPromotable || plain.stdin || isOnReserve) return runPlainExec(plain, ctx.signal);
    // No slot left among the task directories: the call waits, as without promotion.
    const dir = claimEphemeral(req, promote.task_id, cwd, ctx.timings);
    if (!dir) return runPlainExec(plain, ctx.signal);
    let cmd: OwnedCommand;
    try {
      cmd = OwnedCommand.start(
        {
          dir,
          taskId: promote.task_id,
          command: req.command,
          cwd,
          env,
          timeoutMs: req.timeout_ms,
          stdin: false,
          bounds,
          captureBytes: req.max_output_bytes,
          isEphemeral: true,
          reapsGroup: req.reap_group ?? false,
        },
        this.ownerEnv(ctx.timings),
      );
    } catch (err) {
      removeTaskDir(dir);
      if (err instanceof NoFifosError) return runPlainExec(plain, ctx.signal);
      throw err;
    }
    return this.awaitPromotable(cmd, promote.task_id, dir, promote.after_ms, ctx);
  }

  /** The promotable exec's window: its result if it ends in time, else the task it became. */
  private async awaitPromotable(cmd: OwnedCommand, taskId: string, dir: string, afterMs: number, ctx: RequestContext): Promise<ExecResult> {
    this.owned.set(taskId, cmd);
    const window = setTimeout(() => cmd.handOver(), afterMs);
    // The caller gave up: stop the command, as without promotion. Its connection is gone (the
    // server went away): it goes on as a task at once, kept whatever happens.
    const onAbort = (): void => {
      if (ctx.signal?.reason === 'disconnected') {
        cmd.keep();
        cmd.handOver();
      } else cmd.requestStop('cancel');
    };
    if (ctx.signal?.aborted) onAbort();
    else ctx.signal?.addEventListener('abort', onAbort, { once: true });
    let end: OwnedEnd;
    try {
      end = await cmd.ended;
    } finally {
      clearTimeout(window);
      ctx.signal?.removeEventListener('abort', onAbort);
      this.owned.delete(taskId);
    }
    if (end.kind === 'handed_over') return { kind: 'promoted', task: buildView(taskId, dir, observeTask(dir), PAGE_0) };
    // Kept (cancelled by a caller that reads the outcome, or ours went away): recorded as a task.
    if (cmd.isKept) return finishedResult(end);
    // Nobody was told the id: once the answer is out, the directory goes, then the wrapper may.
    const tidy = (): void => {
      removeTaskDir(dir);
      cmd.release();
    };
    if (ctx.afterAnswer) ctx.afterAnswer(tidy);
    else tidy();
    return finishedResult(end);
  }

  cancel(taskId: string, waitMs: number): Promise<TaskStatus | null> | undefined {
    const cmd = this.owned.get(taskId);
    if (!cmd) return undefined;
    // Whoever cancels reads the outcome: the task stays, even an exec's that nobody else knew.
    cmd.keep();
    cmd.requestStop('cancel');
    return Promise.race([cmd.ended.then((end) => (end.kind === 'finished' ? end.status : null)), sleep(waitMs).then(() => null)]);
  }

  /** Lets go of every command (the resident is stopping): each goes on as a task, adopted. */
  handOverAll(): void {
    for (const cmd of this.owned.values()) {
      cmd.keep();
      cmd.handOver();
    }
  }

  private ownerEnv(timings: Timings): OwnerEnv {
    return {
      pool: this.pool,
      timings,
      self: this.self,
      adopterCommand: (dir) =>
        `${this.adopterPrefix} ${shellQuote(dir)}${process.env.AGENT_DEBUG ? ` 2>>${shellQuote(join(dir, 'supervisor-debug.log'))}` : ''}`,
    };
  }
}

/**
 * The shell text that execs an adopting supervisor (the task directory follows): this agent with
 * this resident's own environment and nothing of the command's (env -i), so that no variable of
 * the command's — NODE_OPTIONS, say — changes how the supervisor runs.
 */
function adopterPrefix(): string {
  const envTool = ['/usr/bin/env', '/bin/env'].find((p) => existsSync(p)) ?? 'env';
  const vars = Object.entries(process.env)
    .filter((e): e is [string, string] => typeof e[1] === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(e[0]))
    .map(([k, v]) => shellQuote(`${k}=${v}`));
  // On the agent runtime node runs through its loader: start it the same way (nodeRelaunch).
  const node = nodeRelaunch(process.execPath, [resolve(process.argv[1]!)]);
  return ['exec', shellQuote(envTool), '-i', ...vars, ...[node.file, ...node.args].map(shellQuote), 'supervise', '--adopt'].join(' ');
}

/**
 * Waits (at most `withinMs`) for the adopting supervisor to record itself in the task's status, as
 * a classic start waits for its supervisor's first report: once start has answered, the task is
 * one whose supervisor anyone can see and cancel, even if the disk fills right after.
 */
async function adopterRecorded(dir: string, withinMs: number): Promise<void> {
  for (const giveUpAtMs = Date.now() + withinMs; Date.now() < giveUpAtMs; await sleep(10)) {
    const read = readStatus(dir);
    if (read.kind !== 'ok' || read.status.supervisor !== null || read.status.state !== 'running') return;
  }
}

/** The command's environment a request asks for (see the protocol's `env` and `inherit_env`). */
function commandEnvOf(req: { env?: Record<string, string> | undefined; inherit_env?: boolean | undefined }): NodeJS.ProcessEnv {
  if (req.env === undefined) return commandEnv(process.env);
  return req.inherit_env ? { ...commandEnv(process.env), ...req.env } : { ...req.env };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Claims a task directory for a promotable exec, as `start` claims one (exclusive mkdir, the
 * LIMITS.maxTasks bound kept under races, request.json); null when no slot is left.
 */
function claimEphemeral(req: ExecRequest, taskId: string, cwd: string, timings: Timings): string | null {
  const tasks = ensureTasksDir();
  if (readdirSync(tasks).length >= LIMITS.maxTasks) return null;
  const dir = join(tasks, taskId);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if (isNoSpaceError(err)) throw stateDirFull();
    if ((err as NodeJS.ErrnoException).code === 'EEXIST')
      throw new AgentFailure('invalid_request', 'field `promote.task_id` names an existing task');
    throw err;
  }
  if (readdirSync(tasks).length > LIMITS.maxTasks) {
    rmdirSync(dir);
    return null;
  }
  const request: TaskRequestFile = {
    task_id: taskId,
    command: req.command,
    cwd,
    timeout_s: Math.ceil(req.timeout_ms / 1000),
    grace_ms: timings.graceMs,
    drain_ms: timings.drainMs,
    poll_ms: timings.pollMs,
    stdin: false,
  };
  try {
    writeFileAtomic(join(dir, TASK_FILES.request), JSON.stringify(request) + '\n');
  } catch (err) {
    removeTaskDir(dir);
    throw isNoSpaceError(err) ? stateDirFull() : err;
  }
  return dir;
}

/** Removes a task directory: renamed first, so that it is gone for every reader at once. */
function removeTaskDir(dir: string): void {
  const doomed = join(dirname(dir), `.removed-${crypto().randomBytes(6).toString('hex')}`);
  try {
    renameSync(dir, doomed);
  } catch {
    return;
  }
  rmSync(doomed, { recursive: true, force: true, maxRetries: 3 });
}

/** An exec's answer from its finished task: the captured streams, the exit status, whether it timed out. */
function finishedResult(end: Extract<OwnedEnd, { kind: 'finished' }>): ExecFinished {
  const out = end.stdout!;
  const err = end.stderr!;
  return {
    kind: 'finished',
    exit_code: end.status.exit_code,
    timed_out: end.status.reason === 'timeout',
    stdout_b64: out.data.toString('base64'),
    stderr_b64: err.data.toString('base64'),
    stdout_truncated: out.isTruncated,
    stderr_truncated: err.isTruncated,
    stdout_head_bytes: out.splitAt,
    stderr_head_bytes: err.splitAt,
  };
}
