// list: this sandbox user's tasks, newest first, with get's state rules, and as cheap as get.
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../../shared/limits.js';
import { encodeRequest, ListResultSchema, type AgentRequestInput, type ListResult } from '../../shared/protocol.js';
import { cancelRequest, getRequest, listRequest, startRequest } from '../support/agent-requests.js';
import {
  agentEnv,
  type AgentWorld,
  call,
  callView,
  newTaskId,
  startTask,
  statusWithGroup,
  waitTerminal,
  worldsPerTest,
} from '../support/agent-world.js';
import { AGENT_BUNDLE, fixture } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

beforeAll(() => requireBuild());

const { world, strays } = worldsPerTest();

async function list(w: AgentWorld): Promise<ListResult> {
  const res = await call(w, listRequest());
  if (!res.ok) throw new Error(`list answered ${res.error.code}`);
  return ListResultSchema.parse(res.result);
}

describe('list', () => {
  it('is empty before any task, without creating the state directory', async () => {
    const w = world();
    expect(await list(w)).toEqual({ tasks: [], truncated: false });
  });

  it('shows running, finished and supervisor-less tasks, newest first, with the states get reports', async () => {
    const w = world();
    const ok = await startTask(w, 'echo hello');
    const failed = await startTask(w, `${fixture('exit-n.sh', '4')}`);
    const running = await startTask(w, fixture('forever.sh'));
    const orphaned = await startTask(w, fixture('forever.sh'));
    await waitTerminal(w, ok.task_id);
    await waitTerminal(w, failed.task_id);
    const lost = await statusWithGroup(w, orphaned.task_id);
    strays.push(lost.group!.pgid);
    process.kill(lost.supervisor!.pid, 'SIGKILL');
    await waitFor(() => !isRunning(lost.supervisor!.pid), 'the supervisor to die');

    const { tasks, truncated } = await list(w);
    expect(truncated).toBe(false);
    expect(tasks.map((t) => t.task_id)).toEqual([orphaned.task_id, running.task_id, failed.task_id, ok.task_id]);
    const [o, r, f, s] = tasks;
    expect(s).toMatchObject({ state: 'succeeded', exit_code: 0, stdout_size: 6, stderr_size: 0, stdout_truncated: false });
    expect(s!.finished_at).toBeGreaterThanOrEqual(s!.started_at!);
    expect(f).toMatchObject({ state: 'failed', exit_code: 4, stdout_size: 15, stderr_size: 10 });
    expect(r).toMatchObject({ state: 'running', exit_code: null, finished_at: null });
    expect(r!.started_at).toEqual(expect.any(Number));
    expect(o).toMatchObject({ state: 'unknown', exit_code: null, error: { code: 'supervisor_missing' } });
    // Each names its command, as start was given it.
    expect(tasks.map((t) => [t.command, t.command_truncated])).toEqual([
      [fixture('forever.sh'), false],
      [fixture('forever.sh'), false],
      [fixture('exit-n.sh', '4'), false],
      ['echo hello', false],
    ]);
    // The same verdicts get gives, field for field.
    for (const t of tasks) {
      const view = await callView(w, getRequest(t.task_id));
      const { stdout: _o, stderr: _e, stdout_next_offset: _on, stderr_next_offset: _en, ...summary } = view;
      const { command: _c, command_truncated: _ct, ...listed } = t;
      expect(listed).toEqual(summary);
    }
    await callView(w, cancelRequest(running.task_id));
    await callView(w, cancelRequest(orphaned.task_id));
  });

  it('cuts a long command to its first 2048 characters, saying so', async () => {
    const w = world();
    const command = `: ${'x'.repeat(3000)}; echo done`;
    const long = await startTask(w, command);
    await waitTerminal(w, long.task_id);
    const [t] = (await list(w)).tasks;
    expect(t).toMatchObject({ task_id: long.task_id, command: command.slice(0, LIMITS.listCommandMaxChars), command_truncated: true });
    expect(t!.command).toHaveLength(2048);
  });

  it('reports a directory without a status as unknown, and skips entries that are not tasks', async () => {
    const w = world();
    const tasks = join(w.stateDir, 'tasks');
    const id = newTaskId();
    mkdirSync(join(tasks, id), { recursive: true, mode: 0o700 });
    mkdirSync(join(tasks, 'not-a-task'));
    writeFileSync(join(tasks, 'stray-file'), '');
    expect((await list(w)).tasks).toEqual([
      {
        task_id: id,
        state: 'unknown',
        exit_code: null,
        started_at: null,
        finished_at: null,
        stdout_size: 0,
        stderr_size: 0,
        stdout_truncated: false,
        stderr_truncated: false,
        error: { code: 'no_status', message: expect.any(String) },
      },
    ]);
  });

  it('stays within the 128-task cap, saying when there were more (made by hand)', async () => {
    const w = world();
    const tasks = join(w.stateDir, 'tasks');
    mkdirSync(tasks, { recursive: true, mode: 0o700 });
    for (let i = 0; i < 130; i++) mkdirSync(join(tasks, newTaskId()));
    const result = await list(w);
    expect(result.tasks).toHaveLength(128);
    expect(result.truncated).toBe(true);
  });
});

describe('cost', () => {
  /**
   * What a `call` of this request did at a cost, from a preload script: the costly builtin modules
   * it loaded (those spawning ops need: child_process, net; crypto and streams), and how many zod
   * schemas it built (zod hands each one built to its global post-processor).
   */
  const callCost = (w: AgentWorld, request: AgentRequestInput, expectOk = true) =>
    new Promise<{ modules: string[]; schemas: number }>((resolve, reject) => {
      const preload = join(w.home, 'preload.cjs');
      writeFileSync(
        preload,
        `let schemas = 0; globalThis.__zod_globalConfig = { postProcessor: () => schemas++ };
process.on('exit', () => require('fs').writeSync(2, '\\nCOST ' + JSON.stringify({ modules: process.moduleLoadList.filter((m) => /^NativeModule (child_process|net|crypto|stream)$/.test(m)), schemas }) + '\\n'));`,
      );
      execFile(
        process.execPath,
        ['-r', preload, AGENT_BUNDLE, 'call', encodeRequest(request)],
        { env: agentEnv(w) },
        (err, stdout, stderr) => {
          if (err) return reject(err);
          expect(JSON.parse(stdout)).toMatchObject({ ok: expectOk });
          resolve(JSON.parse(/^COST (.*)$/m.exec(stderr)![1]!) as { modules: string[]; schemas: number });
        },
      );
    });
  const spawnModulesLoaded = async (w: AgentWorld, request: AgentRequestInput) => (await callCost(w, request)).modules;

  // Each of these costs `get` milliseconds it must not pay (its target is 1.5x a bare node start):
  // an eager crypto import in one op once made every get 10 ms slower.
  it('loads neither child_process, net, crypto nor streams for list or get (start does, which shows the probe works)', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'echo hi');
    await waitTerminal(w, id);
    expect(await spawnModulesLoaded(w, listRequest())).toEqual([]);
    expect(await spawnModulesLoaded(w, getRequest(id))).toEqual([]);
    const started = await spawnModulesLoaded(w, startRequest('true'));
    expect(started).toContain('NativeModule child_process');
    expect(started).toContain('NativeModule stream');
  });

  // Building every schema of the protocol at load was half of a get's own time (10 ms of 20).
  it("builds only the schemas its request needs: a get its request's and the status file's, never every request's", async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'echo hi');
    await waitTerminal(w, id);
    // An op no schema has: RequestSchema is built, every request's schema with it, to say so.
    const everyRequest = (await callCost(w, { protocol: 1, op: 'teleport' } as unknown as AgentRequestInput, false)).schemas;
    const get = (await callCost(w, getRequest(id))).schemas;
    const hello = (await callCost(w, { protocol: 1, op: 'hello' })).schemas;
    expect(get).toBeGreaterThan(0);
    expect(get).toBeLessThan(everyRequest / 2);
    expect(hello).toBeLessThan(get);
  });
});
