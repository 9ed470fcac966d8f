// run_command / run_code with `background_after`. Finished in time, the call returns the usual
// result (the same 64 KiB head/tail capping); still running at `background_after`, it returns
// the task handle instead — the handle start_task gives, retaining the sandbox as start_task
// does — so a client that cuts calls at ~60 s loses nothing. Cancelling the call before then
// stops the command, as it would without `background_after`. Its stdin is empty, as on the fast
// path: a promoted task takes no send_task_input (start_task is for commands that need input).
// Two ways, by what the sandbox has:
//   - a resident agent (provider.execPromotable): one exec that the resident runs itself and
//     hands over to a supervisor at background_after; in time, it costs about what the fast path
//     does, and no task is left behind;
//   - none (a sandbox of an older server): the command runs under the agent's supervisor from the
//     start (agent `start`), the call waits with long polls, and removes the finished task, whose
//     id nobody was given. That costs a task per call, so only a call that asked for
//     background_after itself goes this way; the server's default then leaves it on the fast path.
import { LIMITS } from '../../../shared/limits.js';
import { PROTOCOL_VERSION, type TaskView } from '../../../shared/protocol.js';
import { secretValuesOf } from '../../config/config.js';
import { ProviderError, isProviderError } from '../../providers/provider-error.js';
import type { PromotableOutcome, Provider } from '../../providers/provider.js';
import type { SandboxRef } from '../../providers/sandbox-ref.js';
import { definedFields } from '../../util/defined-fields.js';
import { EXEC_OUTPUT_CAP_BYTES, renderCapped, toResult, type ExecToolResult } from './exec-result.js';
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
}

/** One get's long poll while waiting: short enough that byte counts for progress stay fresh. */
const WAIT_CHUNK_S = 10;
/** An offset at the log cap reads nothing, and no output can ever lie beyond it. */
const NOTHING = LIMITS.streamCapBytes;
const HALF = EXEC_OUTPUT_CAP_BYTES / 2;

/**
 * How a run ended for this call: it finished (the view is terminal), it goes on as a task, or
 * the caller gave up and the command was stopped (`isStopped`: confirmed).
 * `isPageZero`: the view holds the first page of each log (else its pages are empty).
 */
type Outcome = { kind: 'finished' | 'promoted'; view: TaskView; isPageZero: boolean } | { kind: 'abandoned'; isStopped: boolean };

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

/** The resident's way: one exec it hands over at background_after; null when the sandbox has no resident that can. */
async function runThroughResident(ctx: ToolContext, ref: SandboxRef, run: PromotableRun): Promise<ExecToolResult | null> {
  const provider = ctx.deps.providers.get(ref.provider);
  if (!provider.execPromotable) return null;
  const taskId = newTaskId();
  // Held from before submission, as start_task does: a session closing meanwhile must not destroy it.
  ctx.deps.retention.begin(ref.qualified);
  let isHeld = true;
  try {
    let outcome: PromotableOutcome | null;
    try {
      outcome = await withProgress(
        ctx,
        (s) => `command running for ${s} s`,
        () =>
          provider.execPromotable!(ref.id, run.command, {
            timeoutS: run.timeoutS,
            maxOutputBytes: EXEC_OUTPUT_CAP_BYTES,
            promote: { taskId, afterS: run.backgroundAfterS },
            ...definedFields({ cwd: run.cwd, envs: run.envs, signal: ctx.signal }),
          }),
      );
    } catch (e) {
      if (!isProviderError(e) || !isUncertain(e)) {
        isHeld = false;
        throw e;
      }
      // The resident went away with the command (`kill -9 -1` in the sandbox, say). Its task goes
      // on (the command's wrapper hands it to a supervisor), so it is followed like a task started
      // for this call — unless it does not exist: then nothing ran, and the call runs another way.
      ctx.deps.log.warn('the agent went away while it ran a call; following its task', { category: e.category });
      const found = await taskOrMissing(ctx, provider, ref, taskId);
      if (found === 'missing') {
        isHeld = false;
        return null;
      }
      learnEnvs(ctx, ref, run.envs);
      const hold = { isHeld: true };
      try {
        return await followTask(ctx, provider, ref, found, Date.now() + run.backgroundAfterS * 1000, hold);
      } finally {
        isHeld = hold.isHeld;
      }
    }
    if (outcome === null) {
      isHeld = false;
      return null;
    }
    learnEnvs(ctx, ref, run.envs);
    if (outcome.kind === 'promoted') {
      ctx.deps.log.info('call promoted to a task', { state: outcome.task.state });
      return handleResult(ref, outcome.task, ctx);
    }
    isHeld = false;
    const r = outcome.result;
    if ((r.timedOut || ctx.signal?.aborted) && run.cleanupAfterTimeout) {
      await provider.exec(ref.id, run.cleanupAfterTimeout, { timeoutS: 30, role: 'service' }).catch(() => undefined);
    }
    if (ctx.signal?.aborted)
      throw new ProviderError('conflict', { code: 'cancelled', detail: 'The call was cancelled; its command was stopped.' });
    return toResult(r, ref, ctx);
  } finally {
    await ctx.deps.retention.end(ref.qualified, isHeld);
  }
}

/** The way without a resident: a task from the start, long polls, its removal once finished in time. */
async function runSupervised(ctx: ToolContext, ref: SandboxRef, run: PromotableRun): Promise<ExecToolResult> {
  const deadlineMs = Date.now() + run.backgroundAfterS * 1000;
  const taskId = newTaskId();
  // Empty stdin, as on the fast path: a command that reads stdin (`grep x`, a prompt) sees
  // end-of-file at once instead of waiting for its timeout, so a call that ends within
  // background_after gets the same result as without it.
  const request = startRequest(taskId, { command: run.command, timeoutS: run.timeoutS, stdin: false, ...definedFields({ cwd: run.cwd }) });
  checkEncodedSize(ctx, request);
  const provider = ctx.deps.providers.get(ref.provider);
  // Held from before submission, as start_task does: a session closing meanwhile must not destroy it.
  ctx.deps.retention.begin(ref.qualified);
  // Until the outcome is known, a task may exist: keep the sandbox if anything below throws.
  let isHeld = true;
  try {
    let started: TaskView;
    try {
      started = await ctx.deps.agent.call(provider, ref.id, request, {
        timeoutS: START_CALL_TIMEOUT_S,
        ...definedFields({ taskEnvs: run.envs }),
      });
    } catch (e) {
      if (isProviderError(e) && isUncertain(e)) {
        learnEnvs(ctx, ref, run.envs);
        ctx.deps.log.warn('task submission uncertain', { category: e.category });
        return handleResult(ref, unknownView(taskId, e.code ?? e.category, e.suggestion), ctx);
      }
      isHeld = false;
      throw e;
    }
    learnEnvs(ctx, ref, run.envs);
    const hold = { isHeld: true };
    try {
      return await followTask(ctx, provider, ref, started, deadlineMs, hold);
    } finally {
      isHeld = hold.isHeld;
    }
  } finally {
    await ctx.deps.retention.end(ref.qualified, isHeld);
  }
}

/**
 * Follows a call's task from `started` until it finishes (the usual result; the task, whose id
 * nobody was given, is removed) or `deadlineMs` passes (its handle). `hold.isHeld` says at the
 * end whether a task may still run, so that the sandbox is kept.
 */
async function followTask(
  ctx: ToolContext,
  provider: Provider,
  ref: SandboxRef,
  started: TaskView,
  deadlineMs: number,
  hold: { isHeld: boolean },
): Promise<ExecToolResult> {
  const outcome = await withProgressOfRun(ctx, started, (sizes) => awaitOutcome(ctx, provider, ref, started, deadlineMs, sizes));
  if (outcome.kind === 'abandoned') {
    hold.isHeld = !outcome.isStopped;
    throw new ProviderError('conflict', {
      code: 'cancelled',
      detail: outcome.isStopped
        ? 'The call was cancelled; its command was stopped.'
        : 'The call was cancelled; stopping its command is not confirmed.',
    });
  }
  if (outcome.kind === 'promoted') {
    ctx.deps.log.info('call promoted to a task', { state: outcome.view.state });
    return handleResult(ref, outcome.view, ctx);
  }
  // Finished: nothing runs any more, so nothing needs the sandbox kept.
  hold.isHeld = false;
  const result = await finishedResult(ctx, provider, ref, outcome.view, outcome.isPageZero);
  await removeTask(ctx, provider, ref, started.task_id);
  return result;
}

/** The task's first page, 'missing' when the sandbox has no such task, or an unknown view saying why it cannot be read. */
async function taskOrMissing(ctx: ToolContext, provider: Provider, ref: SandboxRef, taskId: string): Promise<TaskView | 'missing'> {
  try {
    return await ctx.deps.agent.call(
      provider,
      ref.id,
      { protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId },
      { timeoutS: CALL_SLACK_S },
    );
  } catch (e) {
    const error = isProviderError(e) ? e : new ProviderError('internal');
    if (error.category === 'not_found' && error.code === 'not_found') return 'missing';
    return unknownView(taskId, error.code ?? error.category, error.suggestion);
  }
}

/**
 * Once the provider ran the start (so the caller may see this sandbox), the call's secret-named
 * envs join the sandbox's masking, as on the fast path.
 */
function learnEnvs(ctx: ToolContext, ref: SandboxRef, envs: Record<string, string> | undefined): void {
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
async function awaitOutcome(
  ctx: ToolContext,
  provider: Provider,
  ref: SandboxRef,
  started: TaskView,
  deadlineMs: number,
  sizes: SeenSizes,
): Promise<Outcome> {
  let last = started;
  while (last.state === 'running') {
    const leftMs = deadlineMs - Date.now();
    if (leftMs <= 0) break;
    const waitS = Math.max(1, Math.min(WAIT_CHUNK_S, LIMITS.waitMaxS, Math.ceil(leftMs / 1000)));
    try {
      last = await ctx.deps.agent.call(
        provider,
        ref.id,
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
  if (ctx.signal?.aborted) return stopAbandoned(ctx, provider, ref, started.task_id);
  if (isTerminal(last)) return { kind: 'finished', view: last, isPageZero: last === started };
  // Page 0 for the handle (as start_task shows it), or the finished outcome if it ended meanwhile.
  const page = await firstPage(ctx, provider, ref, started.task_id);
  return { kind: isTerminal(page) ? 'finished' : 'promoted', view: page, isPageZero: true };
}

function isTerminal(view: TaskView): boolean {
  return view.state !== 'running' && view.state !== 'unknown';
}

/** The task's first page; an unknown view saying why if even that cannot be read. */
async function firstPage(ctx: ToolContext, provider: Provider, ref: SandboxRef, taskId: string): Promise<TaskView> {
  try {
    return await ctx.deps.agent.call(
      provider,
      ref.id,
      { protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId },
      { timeoutS: CALL_SLACK_S },
    );
  } catch (e) {
    const error = isProviderError(e) ? e : new ProviderError('internal');
    return unknownView(taskId, error.code ?? error.category, error.suggestion);
  }
}

/**
 * The caller gave up (cancelled the call, or disconnected) before promotion: nobody holds the
 * task's id, so its command is stopped, as a cancelled call's command is without background_after.
 */
async function stopAbandoned(ctx: ToolContext, provider: Provider, ref: SandboxRef, taskId: string): Promise<Outcome> {
  try {
    const cancel = { protocol: PROTOCOL_VERSION, op: 'cancel', task_id: taskId } as const;
    const view = await ctx.deps.agent.call(provider, ref.id, cancel, { timeoutS: CALL_SLACK_S });
    if (!isTerminal(view)) return { kind: 'abandoned', isStopped: false };
    await removeTask(ctx, provider, ref, taskId);
    return { kind: 'abandoned', isStopped: true };
  } catch (e) {
    ctx.deps.log.warn('stopping an abandoned call failed', { category: isProviderError(e) ? e.category : 'internal' });
    return { kind: 'abandoned', isStopped: false };
  }
}

/** The usual run_command result of a finished task: each stream whole, or its first and last 32 KiB. */
async function finishedResult(
  ctx: ToolContext,
  provider: Provider,
  ref: SandboxRef,
  view: TaskView,
  isPageZero: boolean,
): Promise<ExecToolResult> {
  const [stdout, stderr] = await readCapped(ctx, provider, ref, view, isPageZero);
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

/** What to read of a log of `size` bytes: all of it, or its two halves' worth at the ends. */
function rangesOf(size: number): Range[] {
  if (size === 0) return [];
  if (size <= EXEC_OUTPUT_CAP_BYTES) return [{ offset: 0, length: size }];
  return [
    { offset: 0, length: HALF },
    { offset: size - HALF, length: HALF },
  ];
}

type Pieces = readonly [string] | readonly [string, string];

/** Reads the ranges of both logs with as few gets as possible (one page reads both streams when the lengths match). */
async function readCapped(
  ctx: ToolContext,
  provider: Provider,
  ref: SandboxRef,
  view: TaskView,
  isPageZero: boolean,
): Promise<[Pieces, Pieces]> {
  // The first page suffices when it holds each stream whole.
  if (isPageZero && view.stdout_next_offset === view.stdout_size && view.stderr_next_offset === view.stderr_size) {
    return [[view.stdout], [view.stderr]];
  }
  const out = rangesOf(view.stdout_size);
  const err = rangesOf(view.stderr_size);
  const outTexts: string[] = [];
  const errTexts: string[] = [];
  const page = (stdoutOffset: number, stderrOffset: number, limit: number) =>
    ctx.deps.agent.call(
      provider,
      ref.id,
      { protocol: PROTOCOL_VERSION, op: 'get', task_id: view.task_id, stdout_offset: stdoutOffset, stderr_offset: stderrOffset, limit },
      { timeoutS: CALL_SLACK_S },
    );
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
  return [asPieces(outTexts), asPieces(errTexts)];
}

function asPieces(texts: string[]): Pieces {
  return texts.length === 2 ? [texts[0]!, texts[1]!] : [texts[0] ?? ''];
}

/** Deletes a finished task nobody was told about, freeing its slot; a failure is only logged (the slot stays taken). */
async function removeTask(ctx: ToolContext, provider: Provider, ref: SandboxRef, taskId: string): Promise<void> {
  try {
    await ctx.deps.agent.call(provider, ref.id, { protocol: PROTOCOL_VERSION, op: 'remove', task_id: taskId }, { timeoutS: CALL_SLACK_S });
  } catch (e) {
    ctx.deps.log.warn('removing a finished task failed', { category: isProviderError(e) ? e.category : 'internal' });
  }
}

/** The result of a promoted call: the task handle with the six run_command fields and `backgrounded: true`. */
function handleResult(ref: SandboxRef, view: TaskView, ctx: ToolContext): ExecToolResult {
  return { ...present(ref.qualified, view, ctx), timed_out: false, backgrounded: true };
}
