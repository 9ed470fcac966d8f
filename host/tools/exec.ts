// Synchronous execution: run_command and run_code. Output is capped per stream (first and last
// 32 KiB with a marker between) so a result never floods a model's context; long work belongs
// in start_task.
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { LIMITS } from '../../shared/limits.js';
import { secretValuesOf } from '../config.js';
import type { ExecOpts, ExecResult } from '../providers/provider.js';
import type { SandboxRef } from '../sandbox-ref.js';
import { EnvsSchema, SandboxIdSchema, defineTool, intIn, learnSecrets, renewIfOwned, resolveSandbox, type ToolContext } from './tool.js';
import { definedFields } from '../util/defined-fields.js';

/** Most bytes of one stream a run_command/run_code result holds. */
export const EXEC_OUTPUT_CAP_BYTES = 64 * 1024;
/** What starts a line of the server's own in a command's stderr (a note on a limit the command met). */
export const NOTE_PREFIX = '[sandbox-mcp] ';
const OMITTED_MARKER = '\n[... output truncated: the middle was omitted; use start_task for long output ...]\n';

const ExecResultSchema = z.strictObject({
  exit_code: z.number().int().nullable(),
  stdout: z.string(),
  stderr: z.string(),
  stdout_truncated: z.boolean(),
  stderr_truncated: z.boolean(),
  timed_out: z.boolean(),
});

/** Decodes one captured stream, marking where the provider dropped its middle, and masks secrets. */
function renderStream(data: Buffer, isTruncated: boolean, headBytes: number, ref: SandboxRef, ctx: ToolContext): string {
  const mask = (text: string) => ctx.deps.masker.mask(ref.qualified, text);
  if (!isTruncated) return mask(data.toString('utf8'));
  const head = mask(data.subarray(0, headBytes).toString('utf8'));
  const tail = mask(data.subarray(headBytes).toString('utf8'));
  return head + OMITTED_MARKER + tail;
}

/** Renews a session-owned sandbox, runs the command with the tool output cap, and shapes the result. */
async function runCapped(
  ctx: ToolContext,
  sandboxId: string | undefined,
  prepare: (ref: SandboxRef) => Promise<string>,
  opts: Omit<ExecOpts, 'maxOutputBytes'>,
  cleanupAfterTimeout?: string,
) {
  const ref = resolveSandbox(ctx, sandboxId);
  await learnSecrets(ctx, ref);
  await renewIfOwned(ctx, ref);
  const command = await prepare(ref);
  const provider = ctx.deps.providers.get(ref.provider);
  const r = await provider.exec(ref.id, command, {
    ...opts,
    maxOutputBytes: EXEC_OUTPUT_CAP_BYTES,
    ...definedFields({ signal: ctx.signal }),
  });
  // Only once the provider ran it (so the caller may see this sandbox) do its envs join the
  // sandbox's masking: else anyone could mask words out of another principal's output.
  if (opts.envs) ctx.deps.masker.add(ref.qualified, secretValuesOf(opts.envs));
  // A timeout (or a cancelled call) kills the whole group, shell traps included: clean up from outside.
  if ((r.timedOut || ctx.signal?.aborted) && cleanupAfterTimeout)
    await provider.exec(ref.id, cleanupAfterTimeout, { timeoutS: 30, role: 'service' }).catch(() => undefined);
  return { result: toResult(r, ref, ctx) };
}

/** The provider's notes on the limits a command met, as lines after its stderr (never cut by the cap). */
function withNotes(stderr: string, notes: readonly string[] | undefined): string {
  if (!notes || notes.length === 0) return stderr;
  const sep = stderr === '' || stderr.endsWith('\n') ? '' : '\n';
  return stderr + sep + notes.map((n) => `${NOTE_PREFIX}${n}\n`).join('');
}

function toResult(r: ExecResult, ref: SandboxRef, ctx: ToolContext): z.infer<typeof ExecResultSchema> {
  return {
    exit_code: r.exitCode,
    stdout: renderStream(r.stdout, r.stdoutTruncated, r.stdoutHeadBytes, ref, ctx),
    stderr: withNotes(renderStream(r.stderr, r.stderrTruncated, r.stderrHeadBytes, ref, ctx), r.notes),
    stdout_truncated: r.stdoutTruncated,
    stderr_truncated: r.stderrTruncated,
    timed_out: r.timedOut,
  };
}

const runCommand = defineTool({
  name: 'run_command',
  title: 'Run command',
  description:
    'Run a shell command (bash -c) in a sandbox and wait for it (timeout 1-3600 s, default 60; the whole process group is killed at the timeout). ' +
    'Returns exit_code and stdout/stderr, each capped at 64 KiB (first and last 32 KiB) with *_truncated flags; on a timeout timed_out is true and exit_code is ' +
    'whatever the killed shell reported. Anything that may take more than about 50 s, or prints a lot, belongs in start_task.',
  input: z.strictObject({
    command: z.string().min(1).max(LIMITS.commandMaxChars).describe('Shell command (bash -c).'),
    sandbox_id: SandboxIdSchema.optional().describe('Defaults to the session default sandbox.'),
    cwd: z.string().min(1).max(4096).optional().describe('Working directory (relative paths are under the sandbox home).'),
    envs: EnvsSchema.optional().describe('Extra environment variables for this command.'),
    timeout: intIn(1, 3600).default(60).describe("Seconds before the command's process group is killed (timed_out)."),
  }),
  output: ExecResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    return runCapped(ctx, args.sandbox_id, async () => args.command, {
      timeoutS: args.timeout,
      ...definedFields({ cwd: args.cwd, envs: args.envs }),
    });
  },
});

const INTERPRETERS = { python: ['python3', 'py'], javascript: ['node', 'js'], bash: ['bash', 'sh'] } as const;

const runCode = defineTool({
  name: 'run_code',
  title: 'Run code',
  description:
    'Write code to a temporary file in the sandbox and run it with python3, node or bash (default python); same limits and result as run_command.',
  input: z.strictObject({
    code: z.string().min(1).max(1_000_000),
    language: z.enum(['python', 'javascript', 'bash']).default('python'),
    sandbox_id: SandboxIdSchema.optional(),
    timeout: intIn(1, 3600).default(60),
  }),
  output: ExecResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    const [interpreter, ext] = INTERPRETERS[args.language];
    const path = `/tmp/sandbox-mcp-code-${randomBytes(8).toString('hex')}.${ext}`;
    return runCapped(
      ctx,
      args.sandbox_id,
      async (ref) => {
        await ctx.deps.providers.get(ref.provider).writeFile(ref.id, path, Buffer.from(args.code, 'utf8'));
        return `trap 'rm -f ${path}' EXIT; ${interpreter} ${path}`;
      },
      { timeoutS: args.timeout },
      `rm -f ${path}`,
    );
  },
});

/** run_command and run_code. */
export const execTools = [runCommand, runCode];
