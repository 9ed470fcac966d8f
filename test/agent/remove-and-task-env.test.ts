// Protocol minor 2, through the built agent as separate processes: `remove` frees a finished
// task's slot and refuses anything that may still run; task variables (TASK_ENV_PREFIX) reach the
// command under their own names, masked when secret-named, and never the task directory.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { RemoveResultSchema, TASK_ENV_PREFIX, type AgentResponse } from '../../shared/protocol.js';
import { cancelRequest, getRequest, removeRequest, startRequest } from '../support/agent-requests.js';
import { type AgentWorld, call, callView, newTaskId, taskDirOf, waitTerminal, worldsPerTest } from '../support/agent-world.js';
import { requireBuild } from '../support/prerequisites.js';

beforeAll(() => requireBuild());

const { world } = worldsPerTest();

const remove = (w: AgentWorld, taskId: string): Promise<AgentResponse> => call(w, removeRequest(taskId));

async function errorOf(res: Promise<AgentResponse>) {
  const r = await res;
  if (r.ok) throw new Error('expected ok:false');
  return r.error;
}

describe('remove', () => {
  it('deletes a finished task: its directory is gone, get answers not_found, a second remove too', async () => {
    const w = world();
    const id = newTaskId();
    await callView(w, startRequest('echo out; echo err >&2', { task_id: id }));
    expect((await waitTerminal(w, id)).state).toBe('succeeded');
    const res = await remove(w, id);
    expect(res.ok && RemoveResultSchema.parse(res.result)).toEqual({ task_id: id, removed: true });
    expect(existsSync(taskDirOf(w, id))).toBe(false);
    // Nothing else is left in tasks/ either (no renamed leftovers holding a slot).
    expect(readdirSync(join(w.stateDir, 'tasks'))).toEqual([]);
    expect((await errorOf(call(w, getRequest(id)))).code).toBe('not_found');
    expect((await errorOf(remove(w, id))).code).toBe('not_found');
  });

  it('refuses a running task with task_not_finished and leaves it running', async () => {
    const w = world();
    const id = newTaskId();
    await callView(w, startRequest('sleep 300', { task_id: id }));
    const error = await errorOf(remove(w, id));
    expect(error.code).toBe('task_not_finished');
    expect(error.message).toContain('cancel it first');
    expect((await callView(w, getRequest(id))).state).toBe('running');
    expect((await callView(w, cancelRequest(id))).state).toBe('cancelled');
    expect((await remove(w, id)).ok).toBe(true);
  });

  it('validates its request like every op', async () => {
    const w = world();
    expect(await errorOf(remove(w, 'nothex'))).toMatchObject({ code: 'invalid_request', message: 'field `task_id` has an invalid format' });
    expect((await errorOf(call(w, { protocol: 1, op: 'remove', task_id: newTaskId(), extra: 1 } as Record<string, unknown>))).code).toBe(
      'invalid_request',
    );
  });
});

describe('task variables', () => {
  it('reach the command under their own names, override, are masked when secret-named, and never reach request.json', async () => {
    const w = world({ PLAIN: 'from-sandbox', [`${TASK_ENV_PREFIX}PLAIN`]: 'from-task', [`${TASK_ENV_PREFIX}MY_TOKEN`]: 'tok-value-123' });
    const id = newTaskId();
    await callView(w, startRequest('echo "$PLAIN"; echo "$MY_TOKEN"; env | grep -c "^SANDBOX_TASK_ENV_" || true', { task_id: id }));
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'succeeded', stdout: 'from-task\n[MASKED]\n0\n' });
    const request = readFileSync(join(taskDirOf(w, id), 'request.json'), 'utf8');
    expect(request).not.toContain('tok-value-123');
    expect(request).not.toContain('from-task');
  });

  it('do not change how the agent runs: a task NODE_OPTIONS reaches only the command', async () => {
    const w = world({ [`${TASK_ENV_PREFIX}NODE_OPTIONS`]: '--no-such-node-flag' });
    const id = newTaskId();
    await callView(w, startRequest('echo "$NODE_OPTIONS"', { task_id: id }));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: '--no-such-node-flag\n' });
  });
});
