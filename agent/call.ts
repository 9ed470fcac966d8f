// `agent.cjs call <base64url JSON>`: one request in, exactly one JSON line out. The exit code is
// 0 whether the answer is ok or not; a nonzero exit means the agent itself broke. The resident
// agent (serve.ts) answers its frames with the same handleRequest, in its own context.
import { LIMITS } from '../shared/limits.js';
import {
  decodeRequest,
  describeIssue,
  FILE_OP_NAMES,
  OP_NAMES,
  PROTOCOL_MINOR,
  PROTOCOL_VERSION,
  requestSchemaFor,
  RUN_AS_ENV,
  type AgentErrorCode,
  type AgentRequest,
  type AgentResponse,
  type HelloResult,
} from '../shared/protocol.js';
import type { AbortReason } from '../shared/resident.js';
import { AgentFailure, debug } from './errors.js';
import { readInputData } from './input-data.js';
import { cancelTask, type CancelWatcher } from './ops/cancel.js';
import { listFilesOp, readFileOp, writeFileOp } from './ops/files.js';
import { getTask } from './ops/get.js';
import { sendInput } from './ops/input.js';
import { listTasks } from './ops/list.js';
import { removeTask } from './ops/remove.js';
import { startTask } from './ops/start.js';
import { takeRunAs } from './run-as.js';
import { commandEnv } from './task-env.js';
import { workspaceChanges } from './ops/workspace-changes.js';
import { stateDir } from './paths.js';
import { runSelftest } from './selftest.js';
import { readTimings, type Timings } from './timing.js';

declare const __AGENT_VERSION__: string;

/** The agent's own version, fixed at build time. */
export const AGENT_VERSION: string = typeof __AGENT_VERSION__ === 'string' ? __AGENT_VERSION__ : '0.0.0-dev';

const fail = (code: AgentErrorCode, message: string): AgentResponse => ({
  protocol: PROTOCOL_VERSION,
  ok: false,
  error: { code, message },
});

/** The resident agent's own handling of the ops that run commands (resident-tasks.ts). */
export interface ResidentServices extends CancelWatcher {
  /** The greeting's fields beyond `hello`'s. */
  readonly isPromotable: boolean;
  start(req: Extract<AgentRequest, { op: 'start' }>, ctx: RequestContext): Promise<unknown>;
  exec(req: Extract<AgentRequest, { op: 'exec' }>, ctx: RequestContext): Promise<unknown>;
}

/** Where a request is answered: `agent.cjs call` (per-call) or the resident (with its services). */
export interface RequestContext {
  timings: Timings;
  /** The resident's services; absent in `agent.cjs call`. */
  resident?: ResidentServices;
  /** Aborted (with an AbortReason) when the caller gave up or went away; resident only. */
  signal?: AbortSignal & { reason?: AbortReason };
  /** Runs `fn` once the answer has been sent (the resident removes an exec's finished task then). */
  afterAnswer?: (fn: () => void) => void;
}

/** Answers one encoded request (`agent.cjs call`); never throws. */
export async function handleCall(arg: string | undefined): Promise<AgentResponse> {
  let input: unknown;
  try {
    input = decodeRequest(arg ?? '');
  } catch {
    return fail('invalid_request', 'the request must be base64url-encoded JSON');
  }
  return handleRequest(input, { timings: readTimings(process.env) });
}

/** The ops this agent answers in `ctx`: the resident runs exec and the file ops, and leaves selftest to `agent.cjs call`. */
export function opsServed(ctx: RequestContext): string[] {
  return ctx.resident ? [...OP_NAMES.filter((op) => op !== 'selftest'), 'exec', ...FILE_OP_NAMES] : [...OP_NAMES];
}

/** What `hello` answers in `ctx`. */
export function helloResult(ctx: RequestContext): HelloResult {
  return {
    agent_version: AGENT_VERSION,
    protocol: PROTOCOL_VERSION,
    protocol_minor: PROTOCOL_MINOR,
    ops: opsServed(ctx),
    state_dir: stateDir(),
    max_tasks: LIMITS.maxTasks,
    stream_cap_bytes: LIMITS.streamCapBytes,
  };
}

/** Answers one decoded request (untrusted JSON) in `ctx`; never throws. */
export async function handleRequest(input: unknown, ctx: RequestContext): Promise<AgentResponse> {
  if (input === null || typeof input !== 'object' || Array.isArray(input))
    return fail('invalid_request', 'the request must be a JSON object');
  // The major version decides how to read everything else, so it is checked first.
  const protocol = (input as { protocol?: unknown }).protocol;
  if (protocol === undefined) return fail('invalid_request', 'field `protocol` is required');
  if (typeof protocol !== 'number' || !Number.isInteger(protocol)) return fail('invalid_request', 'field `protocol` must be an integer');
  if (protocol !== PROTOCOL_VERSION) {
    return fail('protocol_mismatch', `this agent speaks protocol ${PROTOCOL_VERSION} only; push the agent that matches the host`);
  }
  const parsed = requestSchemaFor(input).safeParse(input);
  if (!parsed.success) return fail('invalid_request', describeIssue(parsed.error, input));
  const req = parsed.data;
  const { timings } = ctx;
  if (!opsServed(ctx).includes(req.op)) {
    return fail(
      'invalid_request',
      `op \`${req.op}\` is not served here (${ctx.resident ? 'use agent.cjs call' : 'it needs the resident agent'})`,
    );
  }
  try {
    switch (req.op) {
      case 'hello':
        return { protocol: PROTOCOL_VERSION, ok: true, result: helloResult(ctx) };
      case 'start': {
        if (ctx.resident) return { protocol: PROTOCOL_VERSION, ok: true, result: await ctx.resident.start(req, ctx) };
        const opts = {
          taskId: req.task_id,
          command: req.command,
          timeoutS: req.timeout_s,
          stdin: req.stdin,
          ...(req.remove_file === undefined ? {} : { removeFile: req.remove_file }),
        };
        // First: the variable leaves this process's environment, which the supervisor and command inherit.
        const runAs = takeRunAs();
        // The field (minor 9) and the variable name the same ids, or the request is refused: never a guess at whom it runs as.
        if (req.run_as && runAs.runAs && (req.run_as.uid !== runAs.runAs.uid || req.run_as.gid !== runAs.runAs.gid))
          return fail('invalid_request', `field \`run_as\` names other ids than ${RUN_AS_ENV}`);
        if (req.run_as) runAs.runAs = req.run_as;
        const env = req.env !== undefined ? { env: req.inherit_env ? { ...commandEnv(process.env), ...req.env } : req.env } : {};
        const result = await startTask({ ...opts, ...env, ...runAs, ...(req.cwd === undefined ? {} : { cwd: req.cwd }) }, timings);
        return { protocol: PROTOCOL_VERSION, ok: true, result };
      }
      case 'exec':
        return { protocol: PROTOCOL_VERSION, ok: true, result: await ctx.resident!.exec(req, ctx) };
      case 'get': {
        const result = await getTask(
          {
            taskId: req.task_id,
            stdoutOffset: req.stdout_offset,
            stderrOffset: req.stderr_offset,
            limit: req.limit,
            waitS: req.wait_s,
            ...(req.tail_bytes === undefined ? {} : { tailBytes: req.tail_bytes }),
          },
          timings,
        );
        return { protocol: PROTOCOL_VERSION, ok: true, result };
      }
      case 'cancel': {
        const result = await cancelTask(
          { taskId: req.task_id, stdoutOffset: req.stdout_offset, stderrOffset: req.stderr_offset, limit: req.limit },
          timings,
          ctx.resident,
        );
        return { protocol: PROTOCOL_VERSION, ok: true, result };
      }
      case 'input': {
        // The resident's stdin is its protocol stream: its data comes inline (a frame is on no command line).
        if (req.data_on_stdin && ctx.resident) return fail('invalid_request', 'field `data_on_stdin` is for agent.cjs call; send `data`');
        const data = req.data_on_stdin ? await readInputData() : Buffer.from(req.data ?? '', 'utf8');
        const result = await sendInput({ taskId: req.task_id, data, eof: req.eof }, timings);
        return { protocol: PROTOCOL_VERSION, ok: true, result };
      }
      case 'list':
        return { protocol: PROTOCOL_VERSION, ok: true, result: listTasks() };
      case 'remove':
        return { protocol: PROTOCOL_VERSION, ok: true, result: await removeTask(req.task_id, timings) };
      case 'workspace_changes': {
        const opts = {
          base: req.base,
          current: req.current,
          patch: req.patch,
          maxEntries: req.max_entries,
          maxPatchBytes: req.max_patch_bytes,
        };
        return {
          protocol: PROTOCOL_VERSION,
          ok: true,
          result: workspaceChanges(req.upper === undefined ? opts : { ...opts, upper: req.upper }),
        };
      }
      case 'selftest':
        return { protocol: PROTOCOL_VERSION, ok: true, result: await runSelftest() };
      // The file operations (minor 7, ops/files.ts).
      case 'read_file':
        return { protocol: PROTOCOL_VERSION, ok: true, result: await readFileOp(req.path, req.offset, req.length) };
      case 'write_file':
        return {
          protocol: PROTOCOL_VERSION,
          ok: true,
          result: await writeFileOp(req.path, Buffer.from(req.data_b64, 'base64'), req.append),
        };
      case 'list_files':
        return { protocol: PROTOCOL_VERSION, ok: true, result: await listFilesOp(req.path, req.depth, req.max_entries) };
    }
  } catch (err) {
    if (err instanceof AgentFailure) return fail(err.code, err.message);
    debug(`internal error: ${(err as Error).stack ?? String(err)}`);
    // Only the error code: a message could quote paths or command text.
    return fail(
      'internal',
      `the agent failed unexpectedly (${(err as NodeJS.ErrnoException).code ?? 'error'}); rerun with AGENT_DEBUG=1 for details`,
    );
  }
}
