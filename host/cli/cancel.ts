// `sandbox-mcp cancel`: cancel_task from a terminal — TERM, then KILL, to the task's process
// group through the agent, which waits up to 3 s for a confirmed end.
import { LIMITS } from '../../shared/limits.js';
import { PROTOCOL_VERSION, TERMINAL_STATES } from '../../shared/protocol.js';
import type { SandboxRef } from '../sandbox-ref.js';
import type { ServerDeps } from '../server-deps.js';

// The agent's own confirmation wait, plus room for a slow exec.
const CANCEL_CALL_TIMEOUT_S = Math.ceil(LIMITS.cancelConfirmMs / 1000) + 30;

/** What cancel found: the line to print and whether the task is confirmed ended (cancelled now or before). */
export interface CancelOutcome {
  line: string;
  isConfirmed: boolean;
}

/** Cancels the task; a task that had already ended keeps (and reports) its outcome. */
export async function cancelTask(
  deps: Pick<ServerDeps, 'providers' | 'agent'>,
  sandbox: SandboxRef,
  taskId: string,
): Promise<CancelOutcome> {
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
  const id = `task ${taskId}`;
  if (view.state === 'cancelled') return { line: `${id} cancelled`, isConfirmed: true };
  if (TERMINAL_STATES.has(view.state)) {
    const exit = view.exit_code !== null ? `, exit code ${view.exit_code}` : '';
    return { line: `${id} had already ended: ${view.state}${exit}`, isConfirmed: true };
  }
  return { line: `${id}: cancellation not confirmed (state ${view.state}); check again with \`sandbox-mcp ls\``, isConfirmed: false };
}
