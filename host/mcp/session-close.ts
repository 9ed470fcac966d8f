// What ending a session does to its sandboxes: those no task retains are destroyed (now, or once
// an in-flight start fails); with --keep-sandboxes, none are. This process's retention knows only
// its own tasks, but tasks outlive server processes: another one sharing the state (another client,
// a reconnect) may have started one in a sandbox this session made. So before destroying, the
// sandbox's agent is asked for its tasks, boundedly; one that lists any, or cannot say, is kept.
import { PROTOCOL_VERSION } from '../../shared/protocol.js';
import { isProviderError } from '../providers/provider-error.js';
import { parseSandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from './server-deps.js';
import type { Session } from './session.js';

/** The longest a session close waits for a sandbox's agent to list its tasks. */
export const TASK_CHECK_MS = 5000;

/** What a sandbox's agent says it holds: some task, none (or the sandbox is gone), or no answer. */
export type TaskHolding = 'tasks' | 'none' | 'unknown';

/**
 * Destroys the session's sandboxes that no task retains (now, or once an in-flight start fails)
 * and whose agent lists no task; with --keep-sandboxes, none: they live until their own deadline.
 */
export async function closeSession(deps: ServerDeps, session: Session): Promise<void> {
  const owned = session.close();
  if (deps.config.keepSandboxes) {
    if (owned.length) deps.log.info('session closed', { destroyed: 0, kept: owned.length });
    return;
  }
  const unretained = owned.filter((id) => deps.retention.mayDestroy(id, async () => void (await destroyUnlessHolding(deps, id))));
  const outcomes = await Promise.all(unretained.map((id) => destroyUnlessHolding(deps, id)));
  const count = (o: TaskHolding | 'destroyed') => outcomes.filter((x) => x === o).length;
  const destroyed = count('destroyed');
  if (owned.length) {
    deps.log.info('session closed', {
      destroyed,
      kept: owned.length - destroyed,
      holding_tasks: count('tasks'),
      unanswered: count('unknown'),
    });
  }
}

/** Destroys the sandbox unless its agent lists a task or cannot say (holdsTasks); says which. */
async function destroyUnlessHolding(deps: ServerDeps, qualified: string): Promise<'destroyed' | 'tasks' | 'unknown'> {
  const holding = await holdsTasks(deps, qualified);
  if (holding !== 'none') return holding;
  await destroy(deps, qualified);
  return 'destroyed';
}

/**
 * Whether the sandbox holds a task, running or finished (its output may still be read), by its
 * agent's `list`, within TASK_CHECK_MS. No resident agent is started for the question (on e2b one
 * is a long-lived command). `none` too when the sandbox is gone (killed meanwhile, or at its
 * deadline) or has no node (no agent ever ran there); any other failure is `unknown`, which keeps
 * the sandbox until its own deadline. Tasks this process ran for calls that finished in time are
 * not counted: their agent removes them just after answering (TaskRetention.noteRemoving).
 */
export async function holdsTasks(deps: ServerDeps, qualified: string): Promise<TaskHolding> {
  const ref = parseSandboxRef(qualified, deps.config.defaultProvider);
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  // Referenced, unlike most timers here: the process must not exit under a check at shutdown.
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), TASK_CHECK_MS)));
  const listed = deps.agent.call(
    deps.providers.get(ref.provider),
    ref.id,
    { protocol: PROTOCOL_VERSION, op: 'list' },
    { timeoutS: TASK_CHECK_MS / 1000, signal: stop.signal, isResidentStartSkipped: true },
  );
  try {
    const answer = await Promise.race([listed, timedOut]);
    if (answer === 'timeout') return 'unknown';
    const isHolding = answer.truncated || answer.tasks.some((t) => !deps.retention.isRemoving(qualified, t.task_id));
    return isHolding ? 'tasks' : 'none';
  } catch (e) {
    if (isProviderError(e) && (e.category === 'not_found' || e.code === 'node_missing')) return 'none';
    return 'unknown';
  } finally {
    clearTimeout(timer);
    // A call still running past the bound is given up (its own timeout would end it too).
    stop.abort();
  }
}

/** Destroys the sandbox; one already gone is fine, any other failure is logged. */
async function destroy(deps: ServerDeps, qualified: string): Promise<void> {
  const ref = parseSandboxRef(qualified, deps.config.defaultProvider);
  try {
    await deps.providers.get(ref.provider).kill(ref.id);
  } catch (e) {
    if (!isProviderError(e) || e.category !== 'not_found')
      deps.log.warn('session cleanup failed', { category: isProviderError(e) ? e.category : 'internal' });
  }
}
