// What the task tools and promoted run_command/run_code calls share: the task result shape, the
// bounds of agent calls, how a submission's uncertainty is judged, and how a task view is shown
// (masked, with its qualified sandbox id).
import { randomFillSync } from 'node:crypto';
import * as z from 'zod';
import { LIMITS } from '../../../shared/limits.js';
import { PROTOCOL_VERSION, TaskViewSchema, type AgentRequestInput, type TaskView } from '../../../shared/protocol.js';
import { ProviderError } from '../../providers/provider-error.js';
import { definedFields } from '../../util/defined-fields.js';
import type { ToolContext } from './tool.js';

/** start_task / get_task / cancel_task: the task view with its qualified sandbox id. */
export const TaskResultSchema = z.strictObject({ sandbox_id: z.string(), ...TaskViewSchema.shape });
export type TaskResult = z.infer<typeof TaskResultSchema>;

/** Exec bounds for agent calls: generous, since they only bound a broken sandbox. */
export const START_CALL_TIMEOUT_S = 60;
/** Added to a call's own waiting (get's wait_s) to bound its exec. */
export const CALL_SLACK_S = 30;

/** What a new task runs: the parts of an agent `start` request a tool decides. */
export interface TaskLaunch {
  command: string;
  /** Already resolved by the path rule. */
  cwd?: string;
  timeoutS: number;
  /**
   * true: a stdin pipe for send_task_input (start_task); false: empty stdin, end-of-file at once,
   * as run_command's fast path gives (a call promoted by background_after).
   */
  stdin: boolean;
}

/** The agent `start` request for task `taskId`: the one place the host builds it. */
export function startRequest(taskId: string, launch: TaskLaunch): AgentRequestInput & { op: 'start' } {
  return {
    protocol: PROTOCOL_VERSION,
    op: 'start',
    task_id: taskId,
    command: launch.command,
    timeout_s: launch.timeoutS,
    stdin: launch.stdin,
    ...definedFields({ cwd: launch.cwd }),
  };
}

const TASK_ID_BYTES = 16;
// Random bytes for 256 ids at a time: one call into the system's generator, where a randomBytes
// per id (every promotable run_command makes one) showed in the server's profile. Each id's bytes
// are used once.
const idPool = Buffer.alloc(TASK_ID_BYTES * 256);
let idPoolAt = idPool.length;

/** A fresh task id, made by the host before submission so an uncertain start still has a handle. */
export function newTaskId(): string {
  if (idPoolAt === idPool.length) {
    randomFillSync(idPool);
    idPoolAt = 0;
  }
  idPoolAt += TASK_ID_BYTES;
  return idPool.toString('hex', idPoolAt - TASK_ID_BYTES, idPoolAt);
}

/**
 * Whether a failed submission may still have started the task: the exec timed out or broke, or
 * the agent's answer was lost. An answer from the agent (ok:false) is certain, and so is a
 * sandbox that does not exist.
 */
export function isUncertain(e: ProviderError): boolean {
  return e.category === 'timeout' || e.category === 'unavailable' || e.code === 'agent_failed';
}

/** Refuses a start request that would exceed the encoded-request cap, before any provider call. */
export function checkEncodedSize(ctx: ToolContext, request: AgentRequestInput): void {
  if (Buffer.byteLength(ctx.deps.agent.commandFor(request)) > LIMITS.encodedRequestMaxBytes) {
    throw new ProviderError('invalid_argument', {
      detail: `field \`command\` is too large once encoded (the encoded request is capped at ${LIMITS.encodedRequestMaxBytes} bytes); put long scripts in a file with write_file`,
    });
  }
}

/** A task view as a tool shows it: output masked with the server's secrets, sandbox id qualified. */
export function present(sandboxId: string, view: TaskView, ctx: ToolContext): TaskResult {
  const { masker } = ctx.deps;
  const result: TaskResult = {
    sandbox_id: sandboxId,
    ...view,
    stdout: masker.mask(sandboxId, view.stdout),
    stderr: masker.mask(sandboxId, view.stderr),
  };
  if (view.stdout_tail !== undefined) result.stdout_tail = masker.mask(sandboxId, view.stdout_tail);
  if (view.stderr_tail !== undefined) result.stderr_tail = masker.mask(sandboxId, view.stderr_tail);
  return result;
}

/** The view of a task whose state cannot be confirmed (its submission or a read failed uncertainly). */
export function unknownView(taskId: string, code: string, message: string): TaskView {
  return {
    task_id: taskId,
    state: 'unknown',
    exit_code: null,
    started_at: null,
    finished_at: null,
    stdout: '',
    stderr: '',
    stdout_next_offset: 0,
    stderr_next_offset: 0,
    stdout_size: 0,
    stderr_size: 0,
    stdout_truncated: false,
    stderr_truncated: false,
    error: { code, message },
  };
}
