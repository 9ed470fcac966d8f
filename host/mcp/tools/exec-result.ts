// The result of run_command and run_code, written once: the six fields, which a call that
// finishes always returns exactly, plus the task handle fields a call promoted by
// `background_after` adds (`backgrounded: true` says which shape came back). And how capped
// output is shown: the first and last 32 KiB of a stream with a marker where the middle was cut.
import * as z from 'zod';
import { TaskViewSchema } from '../../../shared/protocol.js';
import type { ExecResult } from '../../providers/provider.js';
import type { SandboxRef } from '../../providers/sandbox-ref.js';
import type { ToolContext } from './tool.js';

/** Most bytes of one stream a run_command/run_code result holds: its first and last half. */
export const EXEC_OUTPUT_CAP_BYTES = 64 * 1024;
const OMITTED_MARKER = '\n[... output truncated: the middle was omitted; use start_task for long output ...]\n';

const view = TaskViewSchema.shape;

/** The fields a promoted call adds; every one of them is absent from a finished call's result. */
const HANDLE_FIELDS = {
  backgrounded: z
    .literal(true)
    .optional()
    .describe(
      'Present (true) only when the call was promoted to a background task at background_after: the command is still running; the fields below are its task handle, as start_task returns it. Absent when the command finished.',
    ),
  sandbox_id: z.string().optional().describe('With backgrounded: the sandbox of the task, for get_task / cancel_task / send_task_input.'),
  task_id: z.optional(view.task_id).describe('With backgrounded: the task to read with get_task.'),
  state: z.optional(view.state).describe('With backgrounded: the task state (running, or unknown if it cannot be confirmed).'),
  started_at: z.optional(view.started_at),
  finished_at: z.optional(view.finished_at),
  stdout_next_offset: z.optional(view.stdout_next_offset).describe('With backgrounded: pass to get_task as stdout_offset.'),
  stderr_next_offset: z.optional(view.stderr_next_offset).describe('With backgrounded: pass to get_task as stderr_offset.'),
  stdout_size: z.optional(view.stdout_size),
  stderr_size: z.optional(view.stderr_size),
  error: z.optional(view.error),
};
const REQUIRED_HANDLE_FIELDS = [
  'sandbox_id',
  'task_id',
  'state',
  'started_at',
  'finished_at',
  'stdout_next_offset',
  'stderr_next_offset',
  'stdout_size',
  'stderr_size',
] as const;

/** run_command / run_code: the six fields always; the handle fields exactly when `backgrounded`. */
export const ExecResultSchema = z
  .strictObject({
    exit_code: z.number().int().nullable(),
    stdout: z.string(),
    stderr: z.string(),
    stdout_truncated: z.boolean(),
    stderr_truncated: z.boolean(),
    timed_out: z.boolean(),
    ...HANDLE_FIELDS,
  })
  .superRefine((r, issues) => {
    const isBackgrounded = r.backgrounded === true;
    for (const key of Object.keys(HANDLE_FIELDS) as (keyof typeof HANDLE_FIELDS)[]) {
      if (key === 'backgrounded') continue;
      const isPresent = r[key] !== undefined;
      const isRequired = (REQUIRED_HANDLE_FIELDS as readonly string[]).includes(key);
      if (isBackgrounded ? isRequired && !isPresent : isPresent) {
        issues.addIssue({ code: 'custom', path: [key], message: isBackgrounded ? 'required with backgrounded' : 'only with backgrounded' });
      }
    }
  });
export type ExecToolResult = z.infer<typeof ExecResultSchema>;

/** Masked text of a stream of `ref`: one piece, or its head and tail joined by the omitted-output marker. */
export function renderCapped(ctx: ToolContext, ref: SandboxRef, pieces: readonly [string] | readonly [string, string]): string {
  const masked = pieces.map((p) => ctx.deps.masker.mask(ref.qualified, p));
  return masked.join(OMITTED_MARKER);
}

/** The line that ends a stream whose output was lost, never cut to fit: it says why (where, how much room is left). */
function lostMarker(why: string): string {
  return `\n[... output lost: ${why} ...]\n`;
}

/**
 * Decodes one captured stream, marking where the provider dropped its middle (or, `lost`, that
 * what followed could not be kept), and masks secrets.
 */
function renderStream(data: Buffer, isTruncated: boolean, headBytes: number, ref: SandboxRef, ctx: ToolContext, lost?: string): string {
  if (!isTruncated) return renderCapped(ctx, ref, [data.toString('utf8')]);
  const head = data.subarray(0, headBytes).toString('utf8');
  const tail = data.subarray(headBytes).toString('utf8');
  if (lost === undefined) return renderCapped(ctx, ref, [head, tail]);
  // Kept whole up to the loss, or its head and tail where it was longer than the result's cap too.
  return renderCapped(ctx, ref, headBytes < data.length ? [head, tail + lostMarker(lost)] : [head + lostMarker(lost)]);
}

/** What starts a line of the server's own in a command's stderr (a note on a limit the command met, or on its network). */
export const NOTE_PREFIX = '[sandbox-mcp] ';

/**
 * Notes on a failed command, as lines after its stderr (never cut by the cap), masked like the
 * output: a network note names hosts the sandbox chose (`curl https://$TOKEN.example`).
 */
export function withNotes(stderr: string, notes: readonly string[] | undefined, ref: SandboxRef, ctx: ToolContext): string {
  if (!notes || notes.length === 0) return stderr;
  const sep = stderr === '' || stderr.endsWith('\n') ? '' : '\n';
  return stderr + sep + notes.map((n) => `${NOTE_PREFIX}${ctx.deps.masker.mask(ref.qualified, n)}\n`).join('');
}

/** A provider's exec result as run_command/run_code return it: streams decoded, capped and masked, notes after stderr. */
export function toResult(r: ExecResult, ref: SandboxRef, ctx: ToolContext): ExecToolResult {
  return {
    exit_code: r.exitCode,
    stdout: renderStream(r.stdout, r.stdoutTruncated, r.stdoutHeadBytes, ref, ctx, r.outputLost),
    stderr: withNotes(renderStream(r.stderr, r.stderrTruncated, r.stderrHeadBytes, ref, ctx, r.outputLost), r.notes, ref, ctx),
    stdout_truncated: r.stdoutTruncated,
    stderr_truncated: r.stderrTruncated,
    timed_out: r.timedOut,
  };
}
