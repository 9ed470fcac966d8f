// `sandbox-mcp cancel`: cancel_task from a terminal — TERM, then KILL, to the task's process
// group through the agent, which waits up to 3 s for a confirmed end.
import * as z from 'zod';
import { LIMITS } from '../../shared/limits.js';
import { PROTOCOL_VERSION, TASK_STATES, TERMINAL_STATES } from '../../shared/protocol.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';

// The agent's own confirmation wait, plus room for a slow exec.
const CANCEL_CALL_TIMEOUT_S = Math.ceil(LIMITS.cancelConfirmMs / 1000) + 30;

/**
 * What cancel found, and what `cancel --json` prints: the task's state after the request and
 * whether its end is confirmed (cancelled now, or it had already ended and keeps its outcome).
 */
export const CancelResultSchema = z.strictObject({
  sandbox_id: z.string(),
  task_id: z.string(),
  state: z.enum(TASK_STATES),
  exit_code: z.number().int().nullable(),
  confirmed: z.boolean(),
});
export type CancelResult = z.infer<typeof CancelResultSchema>;

/** Cancels the task; a task that had already ended keeps (and reports) its outcome. */
export async function cancelTask(
  deps: Pick<ServerDeps, 'providers' | 'agent'>,
  sandbox: SandboxRef,
  taskId: string,
): Promise<CancelResult> {
  const view = await deps.agent.call(
    deps.providers.get(sandbox.provider),
    sandbox.id,
    // A page of nothing: only the state matters here.
    {
      protocol: PROTOCOL_VERSION,
      op: 'cancel',
      task_id: taskId,
      stdout_offset: LIMITS.streamCapBytes,
      stderr_offset: LIMITS.streamCapBytes,
      limit: 1,
    },
    { timeoutS: CANCEL_CALL_TIMEOUT_S },
  );
  return {
    sandbox_id: sandbox.qualified,
    task_id: taskId,
    state: view.state,
    exit_code: view.exit_code,
    confirmed: TERMINAL_STATES.has(view.state),
  };
}

/** The line `cancel` prints for people: on stdout when confirmed, else on stderr. */
export function cancelLine(result: CancelResult): string {
  const id = `task ${result.task_id}`;
  if (result.state === 'cancelled') return `${id} cancelled`;
  if (result.confirmed) {
    const exit = result.exit_code !== null ? `, exit code ${result.exit_code}` : '';
    return `${id} had already ended: ${result.state}${exit}`;
  }
  return `${id}: cancellation not confirmed (state ${result.state}); check again with \`sandbox-mcp ls\``;
}
