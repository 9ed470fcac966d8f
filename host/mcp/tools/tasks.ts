// Reconnectable background tasks: start_task, get_task, cancel_task, send_task_input. The task
// lives with its supervisor inside the sandbox; any session or server process holding sandbox_id
// + task_id can read it, cancel it or write to its stdin. Task tools never request a lifetime
// extension.
import * as z from 'zod';
import { LIMITS } from '../../../shared/limits.js';
import { InputDataSchema, InputResultSchema, PROTOCOL_VERSION, TASK_ID_PATTERN, type TaskView } from '../../../shared/protocol.js';
import { ProviderError, isProviderError } from '../../providers/provider-error.js';
import { parseSandboxRef, type SandboxRef } from '../../providers/sandbox-ref.js';
import {
  DefaultSandboxIdSchema,
  SandboxIdSchema,
  defineTool,
  intIn,
  learnSecrets,
  resolveSandbox,
  type ExtraContent,
  type ToolContext,
} from './tool.js';
import { definedFields } from '../../util/defined-fields.js';
import { withProgress } from './progress.js';
import {
  CALL_SLACK_S,
  START_CALL_TIMEOUT_S,
  TaskResultSchema,
  checkEncodedSize,
  isUncertain,
  newTaskId,
  present,
  startRequest,
  unknownView,
  type TaskResult,
} from './task-calls.js';
import { CommandSchema, CwdSchema, resolveCwd } from './command-fields.js';
import { networkNotes } from './network-notes.js';
import { defaultTaskCwd } from './workspace.js';

/**
 * Notes beside the task view (whose shape stays the protocol's), for views they may explain: the
 * limits the sandbox met, for a view that is unknown or failed by a SIGKILL (exit code 137, as
 * the memory limit's OOM kill ends a command); for any failed view, what its egress proxy refused
 * or could not reach while the task ran, or the sandbox's network when the output at hand shows a
 * network failure (network-notes.ts; masked: the sandbox chose those names). Best effort: []
 * when the provider cannot tell.
 */
async function notesFor(ctx: ToolContext, ref: SandboxRef, view: TaskView): Promise<ExtraContent[]> {
  const provider = ctx.deps.providers.get(ref.provider);
  const notes: string[] = [];
  if (view.state === 'unknown' || (view.state === 'failed' && view.exit_code === 137)) {
    notes.push(...((await provider.limitNotes?.(ref.id).catch(() => [])) ?? []));
  }
  if (view.state === 'failed' && view.started_at !== null) {
    // The view's times are whole seconds: the window covers the whole of each.
    const window = {
      sinceMs: view.started_at * 1000,
      ...definedFields({ untilMs: view.finished_at !== null ? (view.finished_at + 1) * 1000 : undefined }),
    };
    notes.push(...(await networkNotes(ctx, ref, window, view.stdout + view.stderr)));
  }
  return notes.map((text) => ({ type: 'text', text: `note: ${ctx.deps.masker.mask(ref.qualified, text)}` }));
}

const startTask = defineTool({
  name: 'start_task',
  title: 'Start background task',
  description:
    'Start a shell command in the background in a sandbox and return at once with its task_id and observed state (a short task may already be finished). ' +
    'Save sandbox_id and task_id: any later session can read output with get_task and stop it with cancel_task. ' +
    'The sandbox is retained when this session ends; destroy it with kill_sandbox when done. ' +
    'Never extends the sandbox lifetime: its deadline can stop the task first. If the state is "unknown", inspect with get_task; do not blindly resubmit.',
  input: z.strictObject({
    command: CommandSchema,
    sandbox_id: DefaultSandboxIdSchema,
    cwd: CwdSchema,
    timeout: intIn(1, LIMITS.taskTimeoutMaxS)
      .default(LIMITS.taskTimeoutDefaultS)
      .describe('Seconds until the TASK is stopped (timed_out). Not the sandbox lifetime: the sandbox may end first.'),
  }),
  output: TaskResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    // Resolved here, so a task's cwd follows the same path rule as every other tool's.
    const explicitCwd = resolveCwd(args.cwd);
    // The handle exists before submission, so an uncertain outcome can still be inspected later.
    const taskId = newTaskId();
    // A stdin pipe the task's prompts can be answered through (send_task_input).
    const requestIn = (cwd: string | undefined) =>
      startRequest(taskId, { command: args.command, timeoutS: args.timeout, stdin: true, ...definedFields({ cwd }) });
    checkEncodedSize(ctx, requestIn(explicitCwd));
    const provider = ctx.deps.providers.get(ref.provider);
    // Held from before submission, so a session closing meanwhile cannot destroy the sandbox under it.
    ctx.deps.retention.begin(ref.qualified);
    let isHeld = false;
    try {
      // Inside the hold (a session closing meanwhile must still see this start in flight), and
      // before submission: its failure is certain, nothing was started. Where the workspace is
      // (the default cwd) may take a provider call too.
      await learnSecrets(ctx, ref);
      const request = requestIn(explicitCwd ?? (await defaultTaskCwd(ctx, ref)));
      checkEncodedSize(ctx, request);
      try {
        const view = await ctx.deps.agent.call(provider, ref.id, request, { timeoutS: START_CALL_TIMEOUT_S });
        isHeld = true;
        return { result: present(ref.qualified, view, ctx), content: await notesFor(ctx, ref, view) };
      } catch (e) {
        if (isProviderError(e) && isUncertain(e)) {
          isHeld = true;
          ctx.deps.log.warn('task submission uncertain', { category: e.category });
          const view = unknownView(taskId, e.code ?? e.category, e.suggestion);
          return { result: present(ref.qualified, view, ctx), content: await notesFor(ctx, ref, view) };
        }
        throw e;
      }
    } finally {
      await ctx.deps.retention.end(ref.qualified, isHeld);
    }
  },
});

/** Which task: the pair start_task (or a backgrounded run_command) returned. */
const taskRefShape = {
  sandbox_id: SandboxIdSchema.describe('The sandbox_id returned by start_task (qualified, e.g. local:abc).'),
  // Classic zod around the shared pattern: tool schemas carry descriptions, the protocol's do not.
  task_id: z
    .string()
    .regex(TASK_ID_PATTERN, 'must be 32 lowercase hexadecimal characters')
    .describe('The 32-hex task_id returned by start_task.'),
};

const handleShape = {
  ...taskRefShape,
  stdout_offset: intIn(0, LIMITS.streamCapBytes).default(0).describe('Byte offset to read stdout from: the previous stdout_next_offset.'),
  stderr_offset: intIn(0, LIMITS.streamCapBytes).default(0).describe('Byte offset to read stderr from: the previous stderr_next_offset.'),
  limit: intIn(1, LIMITS.pageMaxBytes).default(LIMITS.pageDefaultBytes).describe('Bytes per stream in this page.'),
};

type Handle = { sandbox_id: string; task_id: string; stdout_offset: number; stderr_offset: number; limit: number };

/**
 * Counts a waiting get against the sandbox's limit (a waiting get holds a process in it), but only
 * once the caller may see the sandbox: a refusal for a full gate would tell another principal
 * that it exists. getOwner goes through the session's ownership scope, which answers a sandbox
 * the caller may not see exactly as a missing one; learnSecrets cannot be relied on for that, as
 * it asks the provider only the first time in a process.
 */
async function enterWaitGate(ctx: ToolContext, ref: SandboxRef): Promise<() => void> {
  await ctx.deps.providers.get(ref.provider).getOwner(ref.id);
  return ctx.deps.waits.enter(ref.qualified);
}

/**
 * get and cancel: by explicit handle only — never the session default, never adopted into this
 * session's cleanup, never a lifetime extension.
 */
async function queryTask(
  ctx: ToolContext,
  handle: Handle,
  op: { op: 'get'; wait_s: number; tail_bytes: number } | { op: 'cancel' },
  timeoutS: number,
): Promise<{ result: TaskResult; content: ExtraContent[] }> {
  const ref = parseSandboxRef(handle.sandbox_id, ctx.deps.config.defaultProvider);
  await learnSecrets(ctx, ref);
  const endWait = op.op === 'get' && op.wait_s > 0 ? await enterWaitGate(ctx, ref) : undefined;
  let view: TaskView;
  try {
    view = await ctx.deps.agent.call(
      ctx.deps.providers.get(ref.provider),
      ref.id,
      {
        protocol: PROTOCOL_VERSION,
        task_id: handle.task_id,
        stdout_offset: handle.stdout_offset,
        stderr_offset: handle.stderr_offset,
        limit: handle.limit,
        ...op,
      },
      { timeoutS },
    );
  } finally {
    endWait?.();
  }
  return { result: present(ref.qualified, view, ctx), content: await notesFor(ctx, ref, view) };
}

const getTask = defineTool({
  name: 'get_task',
  title: 'Read background task',
  description:
    "Read a task's state and a page of its output (limit bytes per stream from the given byte offsets; pass the returned *_next_offset next time; re-reading replays the page). " +
    'wait (0-30 s) returns as soon as there is new output or the state changes. A nonzero exit_code is task data, not an error. Works from any session. ' +
    'A stream over 1 MiB keeps its first MiB (*_truncated: true); once the task ended, the page that reaches the end of that log adds stdout_tail/stderr_tail: the last 32 KiB of the whole stream.',
  input: z.strictObject({
    ...handleShape,
    wait: intIn(0, LIMITS.waitMaxS).default(0).describe('Seconds to wait for new output or a state change before answering (long poll).'),
  }),
  output: TaskResultSchema,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    // A capped stream's end comes with the page that reaches the end of its log (its log is the first MiB).
    const read = () => queryTask(ctx, args, { op: 'get', wait_s: args.wait, tail_bytes: LIMITS.streamTailBytes }, args.wait + CALL_SLACK_S);
    return args.wait > 0 ? await withProgress(ctx, (s) => `waiting for task output for ${s} s`, read) : await read();
  },
});

const cancelTask = defineTool({
  name: 'cancel_task',
  title: 'Cancel background task',
  description:
    'Stop a task: TERM, then KILL, to its process group; waits up to 3 s for a confirmed terminal state. "running" or "unknown" means cancellation is not confirmed. ' +
    'On a finished task it returns the saved outcome and signals nothing. Processes that started their own session escape; kill_sandbox is the complete cleanup.',
  input: z.strictObject(handleShape),
  output: TaskResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    return queryTask(ctx, args, { op: 'cancel' }, CALL_SLACK_S);
  },
});

const sendTaskInput = defineTool({
  name: 'send_task_input',
  title: 'Send input to background task',
  description:
    'Write text to a running task\'s stdin: answer a prompt (include its newline, e.g. "y\\n"), feed a REPL. Tasks from start_task keep stdin open; ' +
    "a backgrounded run_command/run_code call's stdin is empty, as without background_after, so input to it is a conflict error (no_stdin): run commands that need input with start_task. " +
    'eof: true closes stdin after the data (ends `cat`, `read` loops); with all of data written, stdin_closed: false means the close was asked for but not yet confirmed (get_task shows the outcome); eof is applied only once all of data was written. ' +
    'bytes_written below the UTF-8 length of data means the program is not reading: send the rest later. ' +
    'A finished task, or one whose stdin is closed or absent, is a conflict error. Works from any session. The input is neither masked nor logged.',
  input: z.strictObject({
    ...taskRefShape,
    // The agent's own rule (at most LIMITS.inputMaxBytes of UTF-8), with a description for the model.
    data: z
      .string()
      .max(LIMITS.inputMaxBytes)
      .refine((data) => InputDataSchema.safeParse(data).success, { params: { maximum_bytes: LIMITS.inputMaxBytes } })
      .describe(`Text for stdin, at most ${LIMITS.inputMaxBytes} bytes of UTF-8 (may be empty, e.g. with eof).`),
    eof: z.boolean().default(false).describe('Close stdin after writing data.'),
  }),
  output: z.strictObject({ sandbox_id: z.string(), ...InputResultSchema.shape }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    // By explicit handle only, like get and cancel: never the session default, never a renewal.
    const ref = parseSandboxRef(args.sandbox_id, ctx.deps.config.defaultProvider);
    // The data goes on the agent process's stdin, never on its command line (which `ps` on the
    // host and /proc in the sandbox show to every user while the call runs).
    try {
      const written = await ctx.deps.agent.call(
        ctx.deps.providers.get(ref.provider),
        ref.id,
        { protocol: PROTOCOL_VERSION, op: 'input', task_id: args.task_id, data_on_stdin: true, eof: args.eof },
        { timeoutS: CALL_SLACK_S, stdin: Buffer.from(args.data, 'utf8') },
      );
      return { result: { sandbox_id: ref.qualified, ...written } };
    } catch (e) {
      throw isProviderError(e) && e.code === 'no_stdin' ? withStartTaskHint(e) : e;
    }
  },
});

/**
 * The agent's no_stdin refusal, telling the model what to do: the usual case is a backgrounded
 * run_command/run_code call, whose task the agent only knows as started with `stdin: false`.
 */
function withStartTaskHint(e: ProviderError): ProviderError {
  return new ProviderError(e.category, {
    code: 'no_stdin',
    detail: `${e.suggestion}. Backgrounded run_command and run_code calls run with empty stdin, as without background_after: start a command that needs input with start_task.`,
  });
}

/** The task tools. */
export const taskTools = [startTask, getTask, cancelTask, sendTaskInput];
