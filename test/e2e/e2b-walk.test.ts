// The e2b provider through the MCP tools: the real server process, the real `e2b` SDK, and the
// in-repo fake of E2B's APIs (which does not establish real cloud support).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INJECTED_MESSAGE, startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { connectStdio, ok, requirePrerequisites, toolError, waitFor, type StdioServer } from './harness.js';

let fake: FakeE2b;
const open: StdioServer[] = [];

async function server(extraEnv: Record<string, string> = {}): Promise<StdioServer> {
  const s = await connectStdio({ ...fake.env, ...extraEnv }, ['--provider', 'e2b']);
  open.push(s);
  return s;
}

/** Control-plane calls that lengthen a sandbox's lifetime. */
function lifetimeCalls(fromIndex: number) {
  return fake.calls.slice(fromIndex).filter((c) => /\/timeout$/.test(c.path) || c.extendedLifetime === true);
}

const uploads = (fromIndex: number) => fake.envdCalls.slice(fromIndex).filter((c) => c.path === '/files').length;

beforeAll(async () => {
  requirePrerequisites();
  fake = await startFakeE2b();
});
afterAll(async () => {
  await Promise.allSettled(open.map((o) => o.close()));
  await fake?.close();
});

describe('e2b through MCP (against the fake)', () => {
  it('walks the seeds: start, disconnect, new server reads and cancels, cleanup — with no lifetime extension by task tools', async () => {
    const first = await server();
    const sb = await ok(first.client, 'create_sandbox', { timeout: 600 });
    expect(sb.sandbox_id).toMatch(/^e2b:/);
    expect(sb.region).toBeNull();
    expect(sb.disk_size_mb).toBeNull();

    const callsBefore = fake.calls.length;
    const uploadsBefore = fake.envdCalls.length;
    const started = await ok(first.client, 'start_task', { command: 'printf BEFORE; sleep 2; printf AFTER', timeout: 60 });
    const handle = { sandbox_id: sb.sandbox_id, task_id: started.task_id };
    await ok(first.client, 'get_task', handle);
    await ok(first.client, 'get_task', handle);
    // The agent is pushed once for this sandbox, not per call.
    expect(uploads(uploadsBefore)).toBe(1);
    await first.close();

    const second = await server();
    const secondUploads = fake.envdCalls.length;
    let view = await ok(second.client, 'get_task', handle);
    expect(view.stdout.startsWith('BEFORE')).toBe(true);
    await waitFor(async () => {
      view = await ok(second.client, 'get_task', { ...handle, wait: 10 });
      return view.state !== 'running';
    }, 'the task to finish');
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'BEFOREAFTER', stdout_size: 11 });
    const cancelled = await ok(second.client, 'cancel_task', handle);
    expect(cancelled.state).toBe('succeeded');
    // A new server process finds this agent build already installed.
    expect(uploads(secondUploads)).toBe(0);
    expect(lifetimeCalls(callsBefore)).toEqual([]);

    await ok(second.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    expect((await toolError(second.client, 'get_sandbox', { sandbox_id: sb.sandbox_id })).category).toBe('not_found');
  });

  it('maps provider failures to fixed categories without raw messages', async () => {
    const s = await server();
    const cases: [number, string][] = [
      [401, 'authentication'],
      [429, 'rate_limited'],
      [503, 'unavailable'],
      [404, 'not_found'],
    ];
    for (const [status, category] of cases) {
      fake.injectFailure({ path: /^\/sandboxes\/[^/]+$/, method: 'GET', status, times: 10 });
      const e = await toolError(s.client, 'get_sandbox', { sandbox_id: 'e2b:someid' });
      fake.clearFailures();
      expect(e.category, String(status)).toBe(category);
      expect(e.text).not.toContain('FAKE-RAW-MESSAGE');
      expect(e.text).not.toContain(INJECTED_MESSAGE);
      expect(e.text).not.toMatch(/https?:\/\//);
    }
    const wrongKey = await server({ E2B_API_KEY: 'e2b_wrong_key' });
    expect((await toolError(wrongKey.client, 'create_sandbox', {})).category).toBe('authentication');
    expect((await toolError(s.client, 'create_sandbox', { cpu: 2 })).category).toBe('unsupported');
  });

  it('pages list_sandboxes across several fake pages by offset', async () => {
    const s = await server();
    fake.setPageSize(2);
    try {
      const created: string[] = [];
      for (let i = 0; i < 5; i++) created.push((await ok(s.client, 'create_sandbox', {})).sandbox_id);
      const all = (await ok(s.client, 'list_sandboxes', { status: 'running' })).sandboxes.map((m: { sandbox_id: string }) => m.sandbox_id);
      for (const id of created) expect(all).toContain(id);
      const page = await ok(s.client, 'list_sandboxes', { status: 'running', limit: 3, offset: 1 });
      expect(page.sandboxes.map((m: { sandbox_id: string }) => m.sandbox_id)).toEqual(all.slice(1, 4));
    } finally {
      fake.setPageSize(100);
    }
  });
});
