// `sandbox-mcp logs`: prints one stream of a task from a byte offset and, with --follow, keeps
// printing as it grows — by long-polling the agent's `get` (wait_s), never a busy loop — until the
// task ends; then the final state goes to stderr and the exit status tells the outcome. Ctrl-C
// ends the in-flight get (its exec), never the task. Output is masked as get_task masks it.
// A stream cut at the cap ends, once the task has ended, with its kept end (get's tail) after a
// marked gap, as get_task and the dashboard show it.
// With --json the same reading prints JSON Lines: one object per piece of output, the tail, then the end.
import * as z from 'zod';
import { LIMITS } from '../../shared/limits.js';
import { PROTOCOL_VERSION, TASK_STATES, type TaskView } from '../../shared/protocol.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import { CAP_TEXT, TAIL_GAP_TEXT, TAIL_TEXT } from '../util/follow-task.js';
import { completeCharacters } from '../util/utf8-pages.js';
import { UsageError } from './args.js';

/** Exit statuses of `logs` beyond the task's own exit code (documented in --help and the README). */
export const LOGS_EXIT = {
  /** The task ran out of its timeout (as GNU timeout reports it). */
  timedOut: 124,
  /** The task was cancelled. */
  cancelled: 125,
  /** The task's outcome cannot be confirmed (its supervisor is gone). */
  unknown: 123,
  /** Following was stopped with Ctrl-C (the task keeps running). */
  interrupted: 130,
} as const;

/** What to print. */
export interface LogsOpts {
  sandbox: SandboxRef;
  taskId: string;
  stream: 'stdout' | 'stderr';
  /** Byte offset in the stream to start from (0..LIMITS.streamCapBytes). */
  from: number;
  follow: boolean;
}

/** One piece of output of `logs --json`: the (masked) text that starts at byte `offset` of the stream. */
export const LogsChunkSchema = z.strictObject({
  stream: z.enum(['stdout', 'stderr']),
  offset: z.number().int().nonnegative(),
  text: z.string(),
});
export type LogsChunk = z.infer<typeof LogsChunkSchema>;

/**
 * The line of `logs --json` after the chunks of a stream cut at the cap, once the task has ended
 * and its log was read to the end: the stream's kept end (masked), which follows an unknown gap.
 */
export const LogsTailSchema = z.strictObject({
  stream: z.enum(['stdout', 'stderr']),
  tail: z.string(),
});
export type LogsTail = z.infer<typeof LogsTailSchema>;

/** The last line of `logs --json`: the task's state, its exit code, and the offset to resume from (--from). */
export const LogsEndSchema = z.strictObject({
  state: z.enum(TASK_STATES),
  exit_code: z.number().int().nullable(),
  next_offset: z.number().int().nonnegative(),
});
export type LogsEnd = z.infer<typeof LogsEndSchema>;

/** Any line `logs --json` prints: chunks, at most one tail, then one end (none when following was stopped with Ctrl-C). */
export const LogsLineSchema = z.union([LogsChunkSchema, LogsTailSchema, LogsEndSchema]);
export type LogsLine = z.infer<typeof LogsLineSchema>;

/** Where `logs` writes: stdout (waiting while it is full), and its own lines for people (stderr). */
export interface LogsIo {
  write(text: string): Promise<void>;
  note(line: string): void;
  /** Aborted on Ctrl-C. */
  signal: AbortSignal;
  /** JSON Lines on stdout, and nothing on stderr but errors. */
  json: boolean;
}

/**
 * How reading ended: the last view read, the offset after the last byte printed and the stream's
 * kept end (masked; null where there is none to print); null when stopped with Ctrl-C.
 */
type ReadOutcome = { view: TaskView; nextOffset: number; tail: string | null } | null;

// A get's exec may take its wait plus this before it counts as broken.
const CALL_SLACK_S = 30;

/** The exit status `logs` ends with for a task in this state. */
export function exitStatusFor(view: Pick<TaskView, 'state' | 'exit_code'>): number {
  switch (view.state) {
    case 'succeeded':
    case 'running':
      return 0;
    case 'failed':
      return view.exit_code !== null && view.exit_code > 0 && view.exit_code <= 255 ? view.exit_code : 1;
    case 'timed_out':
      return LOGS_EXIT.timedOut;
    case 'cancelled':
      return LOGS_EXIT.cancelled;
    case 'unknown':
      return LOGS_EXIT.unknown;
  }
}

/** One line of `logs --json` (JSON Lines: no newline inside). */
export function jsonLine(line: LogsLine): string {
  return JSON.stringify(line) + '\n';
}

/** The end of `logs --json` for a task last seen as `view`, resuming at `nextOffset`. */
export function logsEnd(view: Pick<TaskView, 'state' | 'exit_code'>, nextOffset: number): LogsEnd {
  return { state: view.state, exit_code: view.exit_code, next_offset: nextOffset };
}

/** The line that ends `logs` on stderr; `isTailPrinted`: the stream's kept end was printed after the gap. */
export function endLine(view: TaskView, stream: 'stdout' | 'stderr', follow: boolean, isTailPrinted: boolean): string {
  const id = `task ${view.task_id}`;
  // No tail came: an older agent, or a supervisor that could not keep the stream's end.
  const rest = isTailPrinted ? `the stream's last ${TAIL_TEXT} were printed after the gap` : 'the rest was not kept';
  const truncationNote = view[`${stream}_truncated`] ? ` (its ${stream} reached the ${CAP_TEXT} cap: ${rest})` : '';
  switch (view.state) {
    case 'running':
      return `${id} is still running${follow ? '' : ' (--follow keeps printing until it ends)'}`;
    case 'succeeded':
    case 'failed':
      return `${id} ${view.state}, exit code ${view.exit_code ?? 'unknown'}${truncationNote}`;
    case 'timed_out':
      return `${id} timed out${truncationNote}`;
    case 'cancelled':
      return `${id} was cancelled${truncationNote}`;
    case 'unknown':
      return `${id}: state unknown${view.error ? ` (${view.error.message})` : ''}`;
  }
}

/** Prints the stream as LogsOpts says, for people or (io.json) scripts; returns the exit status (LOGS_EXIT or the task's code). */
export async function followLogs(deps: Pick<ServerDeps, 'providers' | 'agent' | 'masker'>, opts: LogsOpts, io: LogsIo): Promise<number> {
  const outcome = await readLogs(deps, opts, io.signal, (chunk) => io.write(io.json ? jsonLine(chunk) : chunk.text));
  if (outcome === null) {
    if (!io.json) io.note(`stopped following; task ${opts.taskId} keeps running`);
    return LOGS_EXIT.interrupted;
  }
  if (outcome.tail !== null) {
    if (io.json) await io.write(jsonLine({ stream: opts.stream, tail: outcome.tail }));
    else {
      // The marker on stderr: stdout stays the stream's own bytes.
      io.note(TAIL_GAP_TEXT);
      await io.write(outcome.tail);
    }
  }
  if (io.json) await io.write(jsonLine(logsEnd(outcome.view, outcome.nextOffset)));
  else io.note(endLine(outcome.view, opts.stream, opts.follow, outcome.tail !== null));
  return exitStatusFor(outcome.view);
}

/** Reads the stream from opts.from, handing each masked piece to `emit`, until it ends (or once, without follow). */
async function readLogs(
  deps: Pick<ServerDeps, 'providers' | 'agent' | 'masker'>,
  opts: LogsOpts,
  signal: AbortSignal,
  emit: (chunk: LogsChunk) => Promise<void>,
): Promise<ReadOutcome> {
  const provider = deps.providers.get(opts.sandbox.provider);
  const other = opts.stream === 'stdout' ? 'stderr' : 'stdout';
  const get = (offset: number, waitS: number) =>
    deps.agent.call(
      provider,
      opts.sandbox.id,
      {
        protocol: PROTOCOL_VERSION,
        op: 'get',
        task_id: opts.taskId,
        [`${opts.stream}_offset`]: offset,
        // The other stream is asked from the cap, where it never has anything: it neither fills
        // the page nor wakes the long poll (its tail, should it have one, is not printed).
        [`${other}_offset`]: LIMITS.streamCapBytes,
        limit: LIMITS.pageMaxBytes,
        wait_s: waitS,
        // Comes only on a page that reaches the end of an ended task's capped log (protocol minor 6).
        tail_bytes: LIMITS.streamTailBytes,
      },
      { timeoutS: waitS + CALL_SLACK_S, signal },
    );

  let offset = opts.from;
  let waitS = 0;
  try {
    // The agent refuses an offset past the stream's end (it would skip output unseen), naming the
    // protocol's field: asked here first, the refusal names --from.
    if (opts.from > 0) {
      const size = (await get(LIMITS.streamCapBytes, 0))[`${opts.stream}_size`];
      if (opts.from > size) {
        throw new UsageError(`--from is past the end of ${opts.stream} (${size} bytes so far): pass an offset logs --json printed`);
      }
    }
    // As get_task: the sandbox's own secrets join the masking before any output is shown.
    await deps.masker.learn(opts.sandbox.qualified, () => provider.getEnvironment(opts.sandbox.id));
    for (;;) {
      const view = await get(offset, waitS);
      const next = view[`${opts.stream}_next_offset`];
      const size = view[`${opts.stream}_size`];
      const isFinal = view.state !== 'running' && next >= size;
      const page = completeCharacters(view[opts.stream], next - offset, isFinal);
      if (page.text) await emit({ stream: opts.stream, offset, text: deps.masker.mask(opts.sandbox.qualified, page.text) });
      offset += page.bytes;
      if (offset < size && page.bytes > 0) {
        waitS = 0; // more is there already
        continue;
      }
      if (view.state !== 'running' || !opts.follow) {
        const tail = view[`${opts.stream}_tail`];
        return { view, nextOffset: offset, tail: tail === undefined ? null : deps.masker.mask(opts.sandbox.qualified, tail) };
      }
      if (offset < size) {
        // Only part of a character is there: wait until the stream grows past it, then read again.
        await get(size, LIMITS.waitMaxS);
        waitS = 0;
        continue;
      }
      waitS = LIMITS.waitMaxS;
    }
  } catch (e) {
    if (signal.aborted) return null;
    throw e;
  }
}
