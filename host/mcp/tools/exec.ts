// Synchronous execution: run_command and run_code. Output is capped per stream (first and last
// 32 KiB with a marker between) so a result never floods a model's context; long work belongs
// in start_task. A call still running at `background_after` (the argument, else the server's
// default) becomes a task and returns its handle (promote.ts): no command is lost at a client's
// cut. With background_after 0, or a timeout that ends the command first, a call takes the fast
// path: one provider exec, no task.
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { envsBytes, LIMITS } from '../../../shared/limits.js';
import { BACKGROUND_AFTER_MAX_S, BACKGROUND_AFTER_MIN_S, secretValuesOf } from '../../config/config.js';
import { noStopProcesses, type ExecOpts, type FileRemoval } from '../../providers/provider.js';
import type { SandboxRef } from '../../providers/sandbox-ref.js';
import {
  DefaultSandboxIdSchema,
  EnvsSchema,
  defineTool,
  intIn,
  learnSecrets,
  renewIfOwned,
  resolveSandbox,
  type ToolContext,
} from './tool.js';
import { definedFields } from '../../util/defined-fields.js';
import { EXEC_OUTPUT_CAP_BYTES, ExecResultSchema, toResult, withNotes } from './exec-result.js';
import { CommandSchema, CwdSchema, EXEC_TIMEOUT_DEFAULT_S, ExecTimeoutSchema, resolveCwd } from './command-fields.js';
import { networkNotes } from './network-notes.js';
import { defaultCwd, defaultTaskCwd } from './workspace.js';
import { withProgress } from './progress.js';
import { runPromotable } from './promote.js';

const BackgroundAfterSchema = intIn(BACKGROUND_AFTER_MIN_S, BACKGROUND_AFTER_MAX_S)
  .optional()
  .describe(
    `Seconds (${BACKGROUND_AFTER_MIN_S}-${BACKGROUND_AFTER_MAX_S}) to wait before handing the still-running command over as a background task: the result then has backgrounded: true and a task_id to read with get_task and stop with cancel_task. ` +
      "Default: the server's (usually 50, below a 60 s client cut); 0 waits for the command however long it runs. Its stdin is empty either way.",
  );

/**
 * The background_after in effect: the call's, else the server's default (`isDefault`). None when
 * it is 0, or when the command's own timeout ends it first: such a call could never be promoted,
 * so it takes the fast path.
 */
function backgroundAfterFor(
  ctx: ToolContext,
  requested: number | undefined,
  timeoutS: number,
): { afterS: number; isDefault: boolean } | undefined {
  const afterS = requested ?? ctx.deps.config.backgroundAfterS;
  return afterS > 0 && afterS < timeoutS ? { afterS, isDefault: requested === undefined } : undefined;
}

/** The fast path: runs the command with one provider exec and the tool output cap, and shapes the result. */
async function runCapped(
  ctx: ToolContext,
  ref: SandboxRef,
  command: string,
  opts: Omit<ExecOpts, 'maxOutputBytes'>,
  cleanupAfterTimeout?: string,
) {
  const provider = ctx.deps.providers.get(ref.provider);
  const startedMs = Date.now();
  const r = await withProgress(
    ctx,
    (s) => `command running for ${s} s`,
    () => provider.exec(ref.id, command, { ...opts, maxOutputBytes: EXEC_OUTPUT_CAP_BYTES, ...definedFields({ signal: ctx.signal }) }),
  );
  // Only once the provider ran it (so the caller may see this sandbox) do its envs join the
  // sandbox's masking: else anyone could mask words out of another principal's output.
  if (opts.envs) ctx.deps.masker.add(ref.qualified, secretValuesOf(opts.envs));
  // A timeout (or a cancelled call) kills the whole group, shell traps included: clean up from outside.
  if ((r.timedOut || ctx.signal?.aborted) && cleanupAfterTimeout)
    await provider.exec(ref.id, cleanupAfterTimeout, { timeoutS: 30, role: 'service' }).catch(() => undefined);
  const result = toResult(r, ref, ctx);
  if (r.exitCode === 0) return { result };
  const network = await networkNotes(ctx, ref, { sinceMs: startedMs, untilMs: Date.now() + 1 }, result.stdout + result.stderr);
  return { result: { ...result, stderr: withNotes(result.stderr, network, ref, ctx) } };
}

/**
 * Resolves the sandbox and learns its secrets (before any of its output is shown), then runs
 * `run` on it while renewing it if this session owns it: every run_command/run_code goes through
 * here. The renewal (a deadline read and write, a signal to the keeper: about 1 ms locally, two
 * round trips on e2b) starts once the command is on its way — setImmediate runs after the
 * microtasks that send it — and ends before the result, so the call does not wait for it first.
 */
async function onTarget<T>(ctx: ToolContext, sandboxId: string | undefined, run: (ref: SandboxRef) => Promise<T>): Promise<T> {
  const ref = resolveSandbox(ctx, sandboxId);
  await learnSecrets(ctx, ref);
  // renewIfOwned never rejects (a failed renewal is logged, not the call's failure).
  const renewal = new Promise<void>((resolve) => setImmediate(() => void renewIfOwned(ctx, ref).then(resolve, resolve)));
  try {
    return await run(ref);
  } finally {
    await renewal;
  }
}

const runCommand = defineTool({
  name: 'run_command',
  title: 'Run command',
  description:
    `Run a shell command (bash -c) in a sandbox and wait for it (timeout 1-${LIMITS.taskTimeoutMaxS} s, default ${EXEC_TIMEOUT_DEFAULT_S}; the whole process group is killed at the timeout). ` +
    'Returns exit_code and stdout/stderr, each capped at 64 KiB (first and last 32 KiB) with *_truncated flags; on a timeout timed_out is true and exit_code is ' +
    'whatever the killed shell reported. Clients often cut a call at about 60 s, so a command still running at background_after (the server default, usually 50 s; 0 waits) ' +
    'returns backgrounded: true with a task_id instead (read it with get_task, stop it with cancel_task). ' +
    'Stdin is empty either way (a prompt sees end-of-file); for a command that needs input use start_task and send_task_input. Long output belongs in start_task.',
  input: z.strictObject({
    command: CommandSchema,
    sandbox_id: DefaultSandboxIdSchema,
    cwd: CwdSchema,
    envs: EnvsSchema.optional().describe("Extra environment variables for this command only, added to the sandbox's own."),
    timeout: ExecTimeoutSchema,
    background_after: BackgroundAfterSchema,
  }),
  output: ExecResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    const backgroundAfter = backgroundAfterFor(ctx, args.background_after, args.timeout);
    return onTarget(ctx, args.sandbox_id, async (ref) => {
      if (backgroundAfter) {
        const cwd = resolveCwd(args.cwd) ?? (await defaultTaskCwd(ctx, ref));
        const run = {
          command: args.command,
          timeoutS: args.timeout,
          backgroundAfterS: backgroundAfter.afterS,
          ...definedFields({ cwd, envs: args.envs }),
        };
        const result = await runPromotable(ctx, ref, run, backgroundAfter.isDefault);
        if (result) return { result };
      }
      const cwd = args.cwd ?? (await defaultCwd(ctx, ref));
      return runCapped(ctx, ref, args.command, { timeoutS: args.timeout, ...definedFields({ cwd, envs: args.envs }) });
    });
  },
});

const INTERPRETERS = { python: ['python3', 'py'], javascript: ['node', 'js'], bash: ['bash', 'sh'] } as const;

/**
 * The variable that carries run_code's program to the command's own shell, which writes the
 * temporary file itself (a builtin printf) and unsets it before the interpreter starts: one
 * command, where writing the file first was a file operation of its own (on the local provider an
 * nsenter and a shell script, about 13 ms of CPU). A variable holds no NUL, and a command's
 * variables are bounded (LIMITS.envsMaxBytes, under the kernel's 128 KiB a string): code up to half
 * that goes this way, leaving room for the name's task prefix and a provider's own variables; other
 * code is written by writeFile, as before.
 */
const CODE_VAR = 'SANDBOX_MCP_RUN_CODE';
const CODE_IN_VAR_MAX_BYTES = LIMITS.envsMaxBytes / 2;

/** How run_code's file gets written: by its command from CODE_VAR, or before it with writeFile. */
function codeDelivery(
  code: string,
  path: string,
): { writer: 'command'; prefix: string; envs: Record<string, string> } | { writer: 'file' } {
  const envs = { [CODE_VAR]: code };
  if (code.includes('\0') || envsBytes(envs) > CODE_IN_VAR_MAX_BYTES) return { writer: 'file' };
  return { writer: 'command', prefix: `printf '%s' "$${CODE_VAR}" > ${path} && unset ${CODE_VAR} && `, envs };
}

const runCode = defineTool({
  name: 'run_code',
  title: 'Run code',
  description:
    "Write code to a temporary file in the sandbox and run it with python3, node or bash (default python), in cwd (default: the sandbox's workspace, else its home); same limits and result as run_command, " +
    'including background_after (the temporary file is removed when the code ends, also after promotion).',
  input: z.strictObject({
    code: z.string().min(1).max(1_000_000).describe('The program text (at most 1,000,000 characters), run from a temporary file.'),
    language: z
      .enum(['python', 'javascript', 'bash'])
      .default('python')
      .describe('Interpreter: python (python3), javascript (node) or bash. Default python.'),
    sandbox_id: DefaultSandboxIdSchema,
    cwd: CwdSchema,
    timeout: ExecTimeoutSchema,
    background_after: BackgroundAfterSchema,
  }),
  output: ExecResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    const [interpreter, ext] = INTERPRETERS[args.language];
    const path = `/tmp/sandbox-mcp-code-${randomBytes(8).toString('hex')}.${ext}`;
    const backgroundAfter = backgroundAfterFor(ctx, args.background_after, args.timeout);
    return onTarget(ctx, args.sandbox_id, async (ref) => {
      const provider = ctx.deps.providers.get(ref.provider);
      const delivery = codeDelivery(args.code, path);
      if (delivery.writer === 'file') await provider.writeFile(ref.id, path, Buffer.from(args.code, 'utf8'));
      // The file goes when the code ends (a timeout, a cancel, the end of the task it became
      // included). A sandbox agent of protocol minor 10 removes it (`remove_file`): then the shell
      // execs the interpreter, one process. Elsewhere (an older agent, none) the shell does, by a
      // trap set before the file is written, and stays the interpreter's parent to run it.
      const writes = delivery.writer === 'command' ? delivery.prefix : '';
      const removeFile: FileRemoval = {
        path,
        selfRemovingCommand: `trap 'rm -f ${path}' EXIT; ${writes}${interpreter} ${path}`,
      };
      const command = `${writes}exec ${interpreter} ${path}`;
      const envs = delivery.writer === 'command' ? delivery.envs : undefined;
      const cleanup = `rm -f ${path}`;
      try {
        if (backgroundAfter) {
          const cwd = resolveCwd(args.cwd) ?? (await defaultTaskCwd(ctx, ref));
          const run = {
            command,
            timeoutS: args.timeout,
            backgroundAfterS: backgroundAfter.afterS,
            cleanupAfterTimeout: cleanup,
            removeFile,
            ...definedFields({ cwd, envs }),
          };
          const result = await runPromotable(ctx, ref, run, backgroundAfter.isDefault);
          if (result) return { result };
        }
        const cwd = args.cwd ?? (await defaultCwd(ctx, ref));
        return await runCapped(ctx, ref, command, { timeoutS: args.timeout, removeFile, ...definedFields({ cwd, envs }) }, cleanup);
      } catch (e) {
        // The code may never have run (a missing cwd, a task that never started) or has ended: the file must not stay behind.
        await provider.exec(ref.id, cleanup, { timeoutS: 30, role: 'service' }).catch(() => undefined);
        throw e;
      }
    });
  },
});

const stopProcesses = defineTool({
  name: 'stop_processes',
  title: 'Stop leftover processes',
  description:
    'End every process in a sandbox that is not part of a task: what run_command and run_code left running in the background (`cmd &`, nohup, setsid; servers included) ' +
    'and commands still running. Tasks (start_task, background_after) keep running, and so does the sandbox with its files. TERM, then KILL 1 s later. ' +
    'The way out when a sandbox is at its process limit (insufficient_resources, code process_limit): it needs no new process in the sandbox. ' +
    'Returns how many processes it stopped. Local sandboxes only.',
  input: z.strictObject({
    sandbox_id: DefaultSandboxIdSchema,
  }),
  output: z.strictObject({ sandbox_id: z.string(), stopped: z.number().int() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const provider = ctx.deps.providers.get(ref.provider);
    if (!provider.stopProcesses) throw noStopProcesses();
    const { stopped } = await provider.stopProcesses(ref.id);
    return { result: { sandbox_id: ref.qualified, stopped } };
  },
});

/** run_command and run_code, and stop_processes for what they leave running. */
export const execTools = [runCommand, runCode, stopProcesses];
