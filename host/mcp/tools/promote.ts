// run_command / run_code with `background_after`. Finished in time, the call returns the usual
// result (the same 64 KiB head/tail capping); still running at `background_after`, it returns
// the task handle instead — the handle start_task gives, retaining the sandbox as start_task
// does — so a client that cuts calls at ~60 s loses nothing. Cancelling the call before then
// stops the command, as it would without `background_after`. Its stdin is empty, as on the fast
// path: a promoted task takes no send_task_input (start_task is for commands that need input).
// Two ways, by what the sandbox has:
//   - a resident agent (provider.execPromotable): one exec that the resident runs under a
//     supervisor of its own from the first byte (lossless if the resident dies) and waits on;
//     finished in time, the resident answers with its result and removes the task;
//   - none (a sandbox of an older server): the command runs under the agent's supervisor from the
//     start (agent `start`), the call waits with long polls, and removes the finished task, whose
//     id nobody was given. That costs a task per call, so only a call that asked for
//     background_after itself goes this way; the server's default then leaves it on the fast path.
import { LIMITS } from '../../../shared/limits.js';
import { PROTOCOL_VERSION, type AgentRequestInput, type OpName, type TaskView } from '../../../shared/protocol.js';
import { secretValuesOf } from '../../config/config.js';
import { ProviderError, isProviderError } from '../../providers/provider-error.js';
import type { FileRemoval, PromotableOutcome } from '../../providers/provider.js';
import type { SandboxRef } from '../../providers/sandbox-ref.js';
import type { AgentCallOpts, AgentResult } from '../../tasks/agent-client.js';
import { definedFields } from '../../util/defined-fields.js';
import { EXEC_OUTPUT_CAP_BYTES, renderCapped, toResult, withNotes, type ExecToolResult } from './exec-result.js';
import { networkNotes } from './network-notes.js';
import { describeBytes, withProgress } from './progress.js';
import {
  CALL_SLACK_S,
  START_CALL_TIMEOUT_S,
  checkEncodedSize,
  isUncertain,
  newTaskId,
  present,
  startRequest,
  unknownView,
  type TaskLaunch,
} from './task-calls.js';
import type { ToolContext } from './tool.js';

/** A command promoted to a task if it outlasts `backgroundAfterS`. */
export interface PromotableRun extends Omit<TaskLaunch, 'stdin'> {
  envs?: Record<string, string>;
  backgroundAfterS: number;
  /** Run after a call that timed out or was cancelled in time (the command's traps may not have run). */
  cleanupAfterTimeout?: string;
  /** run_code's program (ExecOpts.removeFile): removed by the agent that runs `command`, or by `selfRemovingCommand` itself. */
  removeFile?: FileRemoval;
}

/** One get's long poll while waiting: short enough that byte counts for progress stay fresh. */
const WAIT_CHUNK_S = 10;
/** An offset at the log cap reads nothing, and no output can ever lie beyond it. */
const NOTHING = LIMITS.streamCapBytes;
const HALF = EXEC_OUTPUT_CAP_BYTES / 2;

/**
 * How a run ended for this call. `rejected`: the agent refused the start, so nothing runs;
 * `uncertain`: whether it started is unknown, so a task may run (the handle says so); `finished`:
 * the view is terminal; `promoted`: it goes on as a task; `abandoned`: the caller gave up and the
 * command was stopped (`isStopped`: confirmed). `isPageZero`: the view holds the first page of
 * each log (else its pages are empty).
 */
export type RunOutcome =
  | { kind: 'rejected'; error: unknown }
  | { kind: 'uncertain'; view: TaskView }
  | { kind: 'finished'; view: TaskView; isPageZero: boolean }
  | { kind: 'promoted'; view: TaskView }
  | { kind: 'abandoned'; isStopped: boolean };

/**
 * Whether the sandbox must outlive its session after this outcome: while a task may still run in
 * it. No outcome (something threw before it was known) keeps it too: a task may exist.
 */
export function keepsSandbox(outcome: RunOutcome | undefined): boolean {
  switch (outcome?.kind) {
    case 'rejected':
    case 'finished':
      return false;
    case 'abandoned':
      return !outcome.isStopped;
    case 'uncertain':
    case 'promoted':
    case undefined:
      return true;
  }
}

/** One sandbox's agent, bound to this call: the helpers below take it instead of (ctx, provider, ref). */
interface TaskAgent {
  readonly ctx: ToolContext;
  readonly ref: SandboxRef;
  call<Op extends OpName>(request: AgentRequestInput & { op: Op }, opts: AgentCallOpts): Promise<AgentResult<Op>>;
}

function taskAgent(ctx: ToolContext, ref: SandboxRef): TaskAgent {
  const provider = ctx.deps.providers.get(ref.provider);
  return {
    ctx,
    ref,
    call: <Op extends OpName>(request: AgentRequestInput & { op: Op }, opts: AgentCallOpts) =>
      ctx.deps.agent.call<Op>(provider, ref.id, request, opts),
  };
}

/**
 * Runs `run`: the usual result if it finishes within backgroundAfterS, else its task's handle (see
 * the module comment); null when the call should take the fast path instead (`isDefault`: the
 * server's background_after, on a sandbox without a resident agent).
 */
export async function runPromotable(
  ctx: ToolContext,
  ref: SandboxRef,
  run: PromotableRun,
  isDefault: boolean,
): Promise<ExecToolResult | null> {
  const viaResident = await runThroughResident(ctx, ref, run);
  if (viaResident !== null) return viaResident;
  return isDefault ? null : runSupervised(ctx, ref, run);
}

/** The resident's way: one exec it runs as a task and waits on until background_after; null when the sandbox has no resident that can. */
async function runThroughResident(ctx: ToolContext, ref: SandboxRef, run: PromotableRun): Promise<ExecToolResult | null> {
  const provider = ctx.deps.providers.get(ref.provider);
  if (!provider.execPromotable) return null;
  const startedAtMs = Date.now();
  const taskId = newTaskId();
  const agent = taskAgent(ctx, ref);
  // Held from before submission, as start_task does: a session closing meanwhile must not destroy it.
  ctx.deps.retention.begin(ref.qualified);
  // No outcome (something threw): a task may exist, so the sandbox is kept.
  let outcome: RunOutcome | undefined;
  try {
    let answer: PromotableOutcome | null;
    try {
      answer = await withProgress(
        ctx,
        (s) => `command running for ${s} s`,
        () =>
          provider.execPromotable!(ref.id, run.command, {
            timeoutS: run.timeoutS,
            maxOutputBytes: EXEC_OUTPUT_CAP_BYTES,
            promote: { taskId, afterS: run.backgroundAfterS },
            ...definedFields({ cwd: run.cwd, envs: run.envs, signal: ctx.signal, removeFile: run.removeFile }),
          }),
      );
    } catch (e) {
      if (!isProviderError(e) || !isUncertain(e)) {
        outcome = { kind: 'rejected', error: e };
        throw e;
      }
      // The resident went away with the command (`kill -9 -1` in the sandbox, say). Its task goes
      // on (the command's wrapper hands it to a supervisor), so it is followed like a task started
      // for this call — unless it does not exist: then nothing ran, and the call runs another way.
      ctx.deps.log.warn('the agent went away while it ran a call; following its task', { category: e.category });
      const found = await taskOrMissing(agent, taskId);
      if (found === 'missing') {
        outcome = { kind: 'rejected', error: e };
        return null;
      }
      learnEnvs(agent, run.envs);
      outcome = await withProgressOfRun(ctx, found, (sizes) =>
        awaitOutcome(agent, found, startedAtMs + run.backgroundAfterS * 1000, sizes),
      );
      return await resultOf(agent, outcome, startedAtMs);
    }
    if (answer === null) {
      outcome = { kind: 'rejected', error: null };
      return null;
    }
    learnEnvs(agent, run.envs);
    if (answer.kind === 'promoted') {
      outcome = { kind: 'promoted', view: answer.task };
      return await resultOf(agent, outcome, startedAtMs);
    }
    // Finished in time: no task is left behind, nothing needs the sandbox kept. The resident
    // removes the task only once it has answered: a session close meanwhile must not count it.
    outcome = { kind: 'rejected', error: null };
    ctx.deps.retention.noteRemoving(ref.qualified, taskId);
    const r = answer.result;
    if ((r.timedOut || ctx.signal?.aborted) && run.cleanupAfterTimeout) {
      await provider.exec(ref.id, run.cleanupAfterTimeout, { timeoutS: 30, role: 'service' }).catch(() => undefined);
    }
    if (ctx.signal?.aborted)
      throw new ProviderError('conflict', { code: 'cancelled', detail: 'The call was cancelled; its command was stopped.' });
    const result = toResult(r, ref, ctx);
    if (r.exitCode === 0) return result;
    // As on the fast path: a failed command says what its network did.
    const network = await networkNotes(ctx, ref, { sinceMs: startedAtMs, untilMs: Date.now() + 1 }, result.stdout + result.stderr);
    return { ...result, stderr: withNotes(result.stderr, network, ref, ctx) };
  } finally {
    await ctx.deps.retention.end(ref.qualified, keepsSandbox(outcome));
  }
}

/** The way without a resident: a task from the start, long polls, its removal once finished in time. */
async function runSupervised(ctx: ToolContext, ref: SandboxRef, run: PromotableRun): Promise<ExecToolResult> {
  const startedAtMs = Date.now();
  const deadlineAtMs = startedAtMs + run.backgroundAfterS * 1000;
  // Empty stdin, as on the fast path: a command that reads stdin (`grep x`, a prompt) sees
  // end-of-file at once instead of waiting for its timeout, so a call that ends within
  // background_after gets the same result as without it.
  const request = startRequest(newTaskId(), {
    // A per-call agent's minor is not known before its start: run_code's program is removed by the command itself.
    command: run.removeFile?.selfRemovingCommand ?? run.command,
    timeoutS: run.timeoutS,
    stdin: false,
    ...definedFields({ cwd: run.cwd }),
  });
  checkEncodedSize(ctx, request);
  const agent = taskAgent(ctx, ref);
  // Held from before submission, as start_task does: a session closing meanwhile must not destroy it.
  ctx.deps.retention.begin(ref.qualified);
  let outcome: RunOutcome | undefined;
  try {
    outcome = await runToOutcome(agent, request, run.envs, deadlineAtMs);
    return await resultOf(agent, outcome, startedAtMs);
  } finally {
    await ctx.deps.retention.end(ref.qualified, keepsSandbox(outcome));
  }
}

/** Submits the start, then waits for the task to end, for the deadline or for the caller to give up. */
async function runToOutcome(
  agent: TaskAgent,
  request: AgentRequestInput & { op: 'start' },
  envs: Record<string, string> | undefined,
  deadlineAtMs: number,
): Promise<RunOutcome> {
  let started: TaskView;
  try {
    started = await agent.call(request, { timeoutS: START_CALL_TIMEOUT_S, ...definedFields({ taskEnvs: envs }) });
  } catch (e) {
    if (!(isProviderError(e) && isUncertain(e))) return { kind: 'rejected', error: e };
    learnEnvs(agent, envs);
    agent.ctx.deps.log.warn('task submission uncertain', { category: e.category });
    return { kind: 'uncertain', view: unknownView(request.task_id, e.code ?? e.category, e.suggestion) };
  }
  learnEnvs(agent, envs);
  return withProgressOfRun(agent.ctx, started, (sizes) => awaitOutcome(agent, started, deadlineAtMs, sizes));
}

/**
 * What the call answers for `outcome`, or throws: a rejected start's error, a cancelled call's.
 * A failed command's notes cover what its network did since `startedAtMs`.
 */
async function resultOf(agent: TaskAgent, outcome: RunOutcome, startedAtMs: number): Promise<ExecToolResult> {
  switch (outcome.kind) {
    case 'rejected':
      throw outcome.error;
    case 'uncertain':
      return handleResult(agent, outcome.view);
    case 'promoted':
      agent.ctx.deps.log.info('call promoted to a task', { state: outcome.view.state });
      return handleResult(agent, outcome.view);
    case 'abandoned':
      throw new ProviderError('conflict', {
        code: 'cancelled',
        detail: outcome.isStopped
          ? 'The call was cancelled; its command was stopped.'
          : 'The call was cancelled; stopping its command is not confirmed.',
      });
    case 'finished': {
      const result = await finishedResult(agent, outcome.view, outcome.isPageZero);
      await removeTask(agent, outcome.view.task_id);
      if (outcome.view.state !== 'failed') return result;
      // As on the fast path: a failed command says what its network did.
      const { ctx, ref } = agent;
      const network = await networkNotes(ctx, ref, { sinceMs: startedAtMs, untilMs: Date.now() + 1 }, result.stdout + result.stderr);
      return { ...result, stderr: withNotes(result.stderr, network, ref, ctx) };
    }
  }
}

/**
 * Once the provider ran the start (so the caller may see this sandbox), the call's secret-named
 * envs join the sandbox's masking, as on the fast path.
 */
function learnEnvs({ ctx, ref }: TaskAgent, envs: Record<string, string> | undefined): void {
  if (envs) ctx.deps.masker.add(ref.qualified, secretValuesOf(envs));
}

/** Byte counts of the task's logs as last seen, for progress messages. */
interface SeenSizes {
  stdout: number;
  stderr: number;
}

function withProgressOfRun<T>(ctx: ToolContext, started: TaskView, work: (sizes: SeenSizes) => Promise<T>): Promise<T> {
  const sizes: SeenSizes = { stdout: started.stdout_size, stderr: started.stderr_size };
  return withProgress(
    ctx,
    (s) => `command running for ${s} s; ${describeBytes(sizes.stdout, sizes.stderr)}`,
    () => work(sizes),
  );
}

/**
 * Long-polls until the task leaves `running` or the deadline passes. The polls read from the log
 * cap (no page, no early return for new output): only a state change or the wait's end answers.
 */
async function awaitOutcome(agent: TaskAgent, started: TaskView, deadlineAtMs: number, sizes: SeenSizes): Promise<RunOutcome> {
  const { ctx } = agent;
  let last = started;
  while (last.state === 'running') {
    const leftMs = deadlineAtMs - Date.now();
    if (leftMs <= 0) break;
    const waitS = Math.max(1, Math.min(WAIT_CHUNK_S, LIMITS.waitMaxS, Math.ceil(leftMs / 1000)));
    try {
      last = await agent.call(
        {
          protocol: PROTOCOL_VERSION,
          op: 'get',
          task_id: started.task_id,
          stdout_offset: NOTHING,
          stderr_offset: NOTHING,
          limit: 1,
          wait_s: waitS,
        },
        { timeoutS: waitS + CALL_SLACK_S, ...definedFields({ signal: ctx.signal }) },
      );
      sizes.stdout = last.stdout_size;
      sizes.stderr = last.stderr_size;
    } catch (e) {
      if (ctx.signal?.aborted) break;
      // The task goes on whatever failed here: hand it over rather than lose it.
      ctx.deps.log.warn('waiting for a task failed; promoting it', { category: isProviderError(e) ? e.category : 'internal' });
      break;
    }
  }
  if (ctx.signal?.aborted) return stopAbandoned(agent, started.task_id);
  if (isTerminal(last)) return { kind: 'finished', view: last, isPageZero: last === started };
  // Page 0 for the handle (as start_task shows it), or the finished outcome if it ended meanwhile.
  const page = await firstPage(agent, started.task_id);
  return isTerminal(page) ? { kind: 'finished', view: page, isPageZero: true } : { kind: 'promoted', view: page };
}

function isTerminal(view: TaskView): boolean {
  return view.state !== 'running' && view.state !== 'unknown';
}

/** The task's first page, 'missing' when the sandbox has no such task, or an unknown view saying why it cannot be read. */
async function taskOrMissing(agent: TaskAgent, taskId: string): Promise<TaskView | 'missing'> {
  try {
    return await agent.call({ protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId }, { timeoutS: CALL_SLACK_S });
  } catch (e) {
    const error = isProviderError(e) ? e : new ProviderError('internal');
    if (error.category === 'not_found' && error.code === 'not_found') return 'missing';
    return unknownView(taskId, error.code ?? error.category, error.suggestion);
  }
}

/** The task's first page; an unknown view saying why if even that cannot be read. */
async function firstPage(agent: TaskAgent, taskId: string): Promise<TaskView> {
  try {
    return await agent.call({ protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId }, { timeoutS: CALL_SLACK_S });
  } catch (e) {
    const error = isProviderError(e) ? e : new ProviderError('internal');
    return unknownView(taskId, error.code ?? error.category, error.suggestion);
  }
}

/**
 * The caller gave up (cancelled the call, or disconnected) before promotion: nobody holds the
 * task's id, so its command is stopped, as a cancelled call's command is without background_after.
 */
async function stopAbandoned(agent: TaskAgent, taskId: string): Promise<RunOutcome> {
  try {
    const view = await agent.call({ protocol: PROTOCOL_VERSION, op: 'cancel', task_id: taskId }, { timeoutS: CALL_SLACK_S });
    if (!isTerminal(view)) return { kind: 'abandoned', isStopped: false };
    await removeTask(agent, taskId);
    return { kind: 'abandoned', isStopped: true };
  } catch (e) {
    agent.ctx.deps.log.warn('stopping an abandoned call failed', { category: isProviderError(e) ? e.category : 'internal' });
    return { kind: 'abandoned', isStopped: false };
  }
}

/** The usual run_command result of a finished task: each stream whole, or its first and last 32 KiB. */
async function finishedResult(agent: TaskAgent, view: TaskView, isPageZero: boolean): Promise<ExecToolResult> {
  const { ctx, ref } = agent;
  const [stdout, stderr] = await readCapped(agent, view, isPageZero);
  return {
    exit_code: view.exit_code,
    stdout: renderCapped(ctx, ref, stdout),
    stderr: renderCapped(ctx, ref, stderr),
    stdout_truncated: view.stdout_size > EXEC_OUTPUT_CAP_BYTES || view.stdout_truncated,
    stderr_truncated: view.stderr_size > EXEC_OUTPUT_CAP_BYTES || view.stderr_truncated,
    timed_out: view.state === 'timed_out',
  };
}

/** A byte range of one log. */
interface Range {
  offset: number;
  length: number;
}

/**
 * What to read of a log of `size` bytes: all of it, or its two halves' worth at the ends; only its
 * head when the stream's true end comes separately (`hasTail`: the log was capped).
 */
function rangesOf(size: number, hasTail: boolean): Range[] {
  if (size === 0) return [];
  if (size <= EXEC_OUTPUT_CAP_BYTES) return [{ offset: 0, length: size }];
  if (hasTail) return [{ offset: 0, length: HALF }];
  return [
    { offset: 0, length: HALF },
    { offset: size - HALF, length: HALF },
  ];
}

type Pieces = readonly [string] | readonly [string, string];

/** Reads the ranges of both logs with as few gets as possible (one page reads both streams when the lengths match). */
async function readCapped(agent: TaskAgent, view: TaskView, isPageZero: boolean): Promise<[Pieces, Pieces]> {
  // The first page suffices when it holds each stream whole.
  if (isPageZero && view.stdout_next_offset === view.stdout_size && view.stderr_next_offset === view.stderr_size) {
    return [[view.stdout], [view.stderr]];
  }
  const page = (stdoutOffset: number, stderrOffset: number, limit: number, tailBytes?: number) =>
    agent.call(
      {
        protocol: PROTOCOL_VERSION,
        op: 'get',
        task_id: view.task_id,
        stdout_offset: stdoutOffset,
        stderr_offset: stderrOffset,
        limit,
        ...definedFields({ tail_bytes: tailBytes }),
      },
      { timeoutS: CALL_SLACK_S },
    );
  // A capped log is the stream's first MiB: its end is the tail the supervisor kept, where it could
  // (a task of an older agent has none: the log's end is shown then, as before).
  const tails = view.stdout_truncated || view.stderr_truncated ? await page(NOTHING, NOTHING, 1, HALF) : null;
  const out = rangesOf(view.stdout_size, tails?.stdout_tail !== undefined);
  const err = rangesOf(view.stderr_size, tails?.stderr_tail !== undefined);
  const outTexts: string[] = [];
  const errTexts: string[] = [];
  for (let i = 0; i < Math.max(out.length, err.length); i++) {
    const o = out[i];
    const e = err[i];
    if (o && e && o.length === e.length) {
      const p = await page(o.offset, e.offset, o.length);
      outTexts.push(p.stdout);
      errTexts.push(p.stderr);
      continue;
    }
    if (o) outTexts.push((await page(o.offset, NOTHING, o.length)).stdout);
    if (e) errTexts.push((await page(NOTHING, e.offset, e.length)).stderr);
  }
  return [asPieces(outTexts, tails?.stdout_tail), asPieces(errTexts, tails?.stderr_tail)];
}

function asPieces(texts: string[], tail: string | undefined): Pieces {
  if (tail !== undefined) return [texts[0] ?? '', tail];
  return texts.length === 2 ? [texts[0]!, texts[1]!] : [texts[0] ?? ''];
}

/** Deletes a finished task nobody was told about, freeing its slot; a failure is only logged (the slot stays taken). */
async function removeTask(agent: TaskAgent, taskId: string): Promise<void> {
  try {
    await agent.call({ protocol: PROTOCOL_VERSION, op: 'remove', task_id: taskId }, { timeoutS: CALL_SLACK_S });
  } catch (e) {
    agent.ctx.deps.log.warn('removing a finished task failed', { category: isProviderError(e) ? e.category : 'internal' });
  }
}

/** The result of a promoted call: the task handle with the six run_command fields and `backgrounded: true`. */
function handleResult({ ctx, ref }: TaskAgent, view: TaskView): ExecToolResult {
  return { ...present(ref.qualified, view, ctx), timed_out: false, backgrounded: true };
}
