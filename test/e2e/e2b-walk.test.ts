// The e2b provider through the MCP tools: the real server process, the real `e2b` SDK, and the
// in-repo fake of E2B's APIs (which does not establish real cloud support).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { INJECTED_MESSAGE, startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { connectStdio, ok, type StdioServer, toolError } from '../support/built-server.js';
import { fakeE2bServers, lifetimeCalls } from '../support/fake-e2b-servers.js';
import { REPO } from '../support/paths.js';
import { isRunning, runningWith } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const e2b = fakeE2bServers();
const open = e2b.open;

async function server(extraEnv: Record<string, string> = {}, f: FakeE2b = e2b.fake): Promise<StdioServer> {
  const s = await connectStdio({ ...f.env, ...extraEnv }, ['--provider', 'e2b']);
  open.push(s);
  return s;
}

const METADATA_KEYS = ['cpu_count', 'disk_size_mb', 'end_at', 'memory_mb', 'region', 'sandbox_id', 'started_at', 'status', 'template'];
const rawId = (qualified: string) => qualified.replace(/^e2b:/, '');

const uploads = (fromIndex: number) => e2b.fake.envdCalls.slice(fromIndex).filter((c) => c.path === '/files').length;
/** Sandboxes whose resident agent (`agent.cjs serve`) was started since `fromIndex`, once per start. */
const residentStarts = (fromIndex: number) =>
  e2b.fake.envdCalls
    .slice(fromIndex)
    .filter((c) => c.path === '/process.Process/Start' && / serve --idle-exit-s /.test(c.command ?? ''))
    .map((c) => c.sandboxId);
const AGENT_BYTES = readFileSync(join(REPO, 'dist/agent.cjs')).length;
/** The agent's bytes sent into sandboxes since `fromIndex`: uploaded, or on a resident's stdin. */
const agentPushes = (fromIndex: number) =>
  uploads(fromIndex) +
  e2b.fake.envdCalls.slice(fromIndex).filter((c) => c.path === '/process.Process/SendInput' && (c.inputBytes ?? 0) >= AGENT_BYTES).length;

/** What no result or log may contain: the fake's raw error text, its URL, any URL. */
function expectNoLeak(text: string): void {
  expect(text).not.toContain('FAKE-RAW-MESSAGE');
  expect(text).not.toContain(INJECTED_MESSAGE);
  expect(text).not.toContain(e2b.fake.url);
  expect(text).not.toMatch(/https?:\/\//);
}

describe('e2b through MCP (against the fake)', () => {
  it('walks the seeds: start, disconnect, a new server process reads and cancels, cleanup — task tools never lengthen the lifetime', async () => {
    const first = await server();
    const sb = await ok(first.client, 'create_sandbox', { timeout: 600 });
    expect(sb.sandbox_id).toMatch(/^e2b:fake[0-9a-f]+$/);
    expect(Object.keys(sb).sort()).toEqual(METADATA_KEYS);
    expect(sb).toMatchObject({ region: null, disk_size_mb: null, status: 'running', template: 'base' });
    const fakeSb = e2b.fake.sandbox(rawId(sb.sandbox_id))!;
    const endAt = fakeSb.endAt.getTime();

    const callsBefore = e2b.fake.calls.length;
    const uploadsBefore = e2b.fake.envdCalls.length;
    const started = await ok(first.client, 'start_task', { command: 'printf BEFORE; sleep 60; printf AFTER', timeout: 120 });
    expect(started.task_id).toMatch(/^[0-9a-f]{32}$/);
    const handle = { sandbox_id: sb.sandbox_id, task_id: started.task_id };
    await waitFor(async () => (await ok(first.client, 'get_task', { ...handle, wait: 5 })).stdout === 'BEFORE', 'the task to print BEFORE');
    await ok(first.client, 'get_task', handle);
    // One resident agent for this sandbox in this process (the agent sent once, on its stdin), not a process per call.
    expect(residentStarts(uploadsBefore)).toEqual([rawId(sb.sandbox_id)]);
    expect(agentPushes(uploadsBefore)).toBe(1);
    await first.close();
    // start_task retained the sandbox: the first session's end did not destroy it.
    expect(e2b.fake.sandbox(rawId(sb.sandbox_id))).toBeDefined();

    const second = await server();
    const callsSecond = e2b.fake.calls.length;
    const uploadsSecond = e2b.fake.envdCalls.length;
    const view = await ok(second.client, 'get_task', handle);
    expect(view).toMatchObject({ sandbox_id: sb.sandbox_id, state: 'running', stdout: 'BEFORE', stdout_next_offset: 6 });
    const cancelled = await ok(second.client, 'cancel_task', handle);
    expect(cancelled).toMatchObject({ state: 'cancelled', stdout: 'BEFORE' });
    expect((await ok(second.client, 'get_task', handle)).state).toBe('cancelled');
    // Repeating the cancel returns the saved outcome.
    expect((await ok(second.client, 'cancel_task', handle)).state).toBe('cancelled');

    // The fresh process did reach envd through a connect — one that asked for no extension.
    const connects = e2b.fake.calls.slice(callsSecond).filter((c) => c.path.endsWith('/connect'));
    expect(connects.length).toBeGreaterThanOrEqual(1);
    for (const c of connects) expect(c.extendedLifetime).toBe(false);
    expect(lifetimeCalls(e2b.fake, callsBefore)).toEqual([]);
    expect(fakeSb.endAt.getTime()).toBe(endAt);
    // A new server process starts its own resident, and finds this agent build already installed.
    expect(residentStarts(uploadsSecond)).toEqual([rawId(sb.sandbox_id)]);
    expect(agentPushes(uploadsSecond)).toBe(0);

    // Inspecting and extending an id outside the session are single static calls: no connect, no resume.
    const staticMark = e2b.fake.calls.length;
    expect((await ok(second.client, 'get_sandbox', { sandbox_id: sb.sandbox_id })).end_at).toBe(new Date(endAt).toISOString());
    expect(await ok(second.client, 'set_sandbox_timeout', { sandbox_id: sb.sandbox_id, timeout: 900 })).toEqual({
      success: true,
      sandbox_id: sb.sandbox_id,
      timeout: 900,
    });
    expect(e2b.fake.calls.slice(staticMark).map((c) => [c.method, c.path, c.body])).toEqual([
      ['GET', `/sandboxes/${rawId(sb.sandbox_id)}`, undefined],
      ['POST', `/sandboxes/${rawId(sb.sandbox_id)}/timeout`, { timeout: 900 }],
    ]);

    expect(await ok(second.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id })).toEqual({
      success: true,
      sandbox_id: sb.sandbox_id,
      destroyed: true,
    });
    expect(e2b.fake.sandbox(rawId(sb.sandbox_id))).toBeUndefined();
    expect((await toolError(second.client, 'get_sandbox', { sandbox_id: sb.sandbox_id })).category).toBe('not_found');
  });

  it("a session's end keeps a sandbox another server process started a task in, destroys the other, and starts no resident to ask", async () => {
    const a = await server();
    const b = await server();
    const withTask = await ok(a.client, 'create_sandbox', { timeout: 600 });
    const bare = await ok(a.client, 'create_sandbox', { timeout: 600 });
    const handle = {
      sandbox_id: withTask.sandbox_id,
      task_id: (await ok(b.client, 'start_task', { sandbox_id: withTask.sandbox_id, command: 'echo from-b' })).task_id as string,
    };
    await waitFor(async () => (await ok(b.client, 'get_task', { ...handle, wait: 5 })).state === 'succeeded', 'the task to finish');
    const mark = e2b.fake.envdCalls.length;
    const callsMark = e2b.fake.calls.length;
    await a.close();
    const closed = a
      .stderr()
      .split('\n')
      .find((l) => l.includes('"session closed"'));
    expect(JSON.parse(closed!)).toMatchObject({ destroyed: 1, kept: 1, holding_tasks: 1, unanswered: 0 });
    expect(e2b.fake.sandbox(rawId(withTask.sandbox_id))).toBeDefined();
    expect(e2b.fake.sandbox(rawId(bare.sandbox_id))).toBeUndefined();
    // A asked each sandbox's agent as a one-off command: no resident (a long-lived command) for it, no lifetime change.
    expect(residentStarts(mark)).toEqual([]);
    expect(lifetimeCalls(e2b.fake, callsMark)).toEqual([]);
    expect(await ok(b.client, 'get_task', handle)).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'from-b\n' });
    // The same agent decides offsets here: at the end an empty page, past it a refusal naming the field.
    expect(await ok(b.client, 'get_task', { ...handle, stdout_offset: 7 })).toMatchObject({ stdout: '', stdout_next_offset: 7 });
    expect(await toolError(b.client, 'get_task', { ...handle, stdout_offset: 8 })).toMatchObject({
      category: 'invalid_argument',
      suggestion: '`stdout_offset` is past the end of stdout (7 bytes so far): pass a previous stdout_next_offset',
    });
    await ok(b.client, 'kill_sandbox', { sandbox_id: withTask.sandbox_id });
  });

  it('starts one resident agent per sandbox in a server process, and uses unqualified ids as e2b ids', async () => {
    const s = await server();
    const a = await ok(s.client, 'create_sandbox', {});
    const b = await ok(s.client, 'create_sandbox', {});
    const mark = e2b.fake.envdCalls.length;
    // Concurrent first calls into a fresh sandbox share one resident, and one push of the agent.
    const concurrent = await Promise.all([1, 2, 3].map(() => ok(s.client, 'start_task', { sandbox_id: a.sandbox_id, command: 'true' })));
    for (const t of concurrent) expect(t.state).not.toBe('unknown');
    for (const id of [b.sandbox_id, rawId(a.sandbox_id)]) {
      const t = await ok(s.client, 'start_task', { sandbox_id: id, command: 'true' });
      expect(t.sandbox_id).toMatch(/^e2b:/);
    }
    expect(residentStarts(mark).sort()).toEqual([rawId(a.sandbox_id), rawId(b.sandbox_id)].sort());
    expect(agentPushes(mark)).toBe(2);
    expect((await ok(s.client, 'get_sandbox', { sandbox_id: rawId(b.sandbox_id) })).sandbox_id).toBe(b.sandbox_id);
    for (const id of [a.sandbox_id, b.sandbox_id]) await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it("a resident killed -9 mid-call loses nothing: the call answers with its command's outcome, and the next call starts another", async () => {
    const s = await server();
    const sb = await ok(s.client, 'create_sandbox', {});
    const id = rawId(sb.sandbox_id);
    const mark = e2b.fake.envdCalls.length;
    expect((await ok(s.client, 'run_command', { command: 'echo first' })).stdout).toBe('first\n');
    // The fake runs sandbox processes on this machine: the resident is found by its argv and the sandbox's marker.
    const residents = () =>
      runningWith((argv) => argv.includes('serve') && argv.includes('--idle-exit-s')).filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`FAKE_E2B_SANDBOX_ID=${id}`);
        } catch {
          return false;
        }
      });
    const [resident] = await waitFor(() => (residents().length === 1 ? residents() : null), 'the resident');
    const lines = Array.from({ length: 30 }, (_, i) => `line-${i + 1}\n`).join('');
    const call = ok(s.client, 'run_command', {
      command: 'for i in $(seq 1 30); do echo "line-$i"; sleep 0.05; done; exit 3',
      timeout: 120,
      background_after: 60,
    });
    await waitFor(
      () => e2b.fake.envdCalls.slice(mark).some((c) => c.path === '/process.Process/SendInput' && (c.inputBytes ?? 0) > 0),
      'the call to reach it',
    );
    await new Promise((r) => setTimeout(r, 300));
    process.kill(resident!, 'SIGKILL');
    expect(await call).toMatchObject({ exit_code: 3, stdout: lines, timed_out: false });
    expect((await ok(s.client, 'run_command', { command: 'echo again' })).stdout).toBe('again\n');
    expect(residentStarts(mark)).toEqual([id, id]);
    await ok(s.client, 'kill_sandbox', {});
  });

  it('serves calls at once through its resident: a fast call during a slow one answers first, both under supervisors it reuses, none run as an envd command of its own', async () => {
    const s = await server();
    const sb = await ok(s.client, 'create_sandbox', {});
    const id = rawId(sb.sandbox_id);
    /** The sandbox's supervisors: the fake runs sandbox processes on this machine, marked with the sandbox's id. */
    const supervisors = () =>
      runningWith((argv) => argv.includes('supervise')).filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`FAKE_E2B_SANDBOX_ID=${id}`);
        } catch {
          return false;
        }
      });
    // The command's parent is its supervisor (the task's shell execs it).
    const slowAndFast = async (): Promise<number[]> => {
      const order: string[] = [];
      const mark = e2b.fake.envdCalls.length;
      const slow = ok(s.client, 'run_command', { command: 'sleep 2; echo "slow $PPID"' }).then((r) => (order.push('slow'), r));
      await waitFor(
        () => e2b.fake.envdCalls.slice(mark).some((c) => c.path === '/process.Process/SendInput' && (c.inputBytes ?? 0) > 0),
        'the slow call to reach the resident',
      );
      const fast = await ok(s.client, 'run_command', { command: 'echo "fast $PPID"' });
      order.push('fast');
      const slowResult = await slow;
      expect(order).toEqual(['fast', 'slow']);
      expect(fast.stdout).toMatch(/^fast \d+\n$/);
      expect(slowResult.stdout).toMatch(/^slow \d+\n$/);
      // Every call a line to the resident: no envd command started for either (no per-call fallback).
      expect(e2b.fake.envdCalls.slice(mark).filter((c) => c.path === '/process.Process/Start')).toEqual([]);
      return [fast.stdout, slowResult.stdout].map((out: string) => Number(out.split(' ')[1]));
    };
    expect((await ok(s.client, 'run_command', { command: 'echo first' })).stdout).toBe('first\n');
    // The first time, the fast call boots a second supervisor; from then on both come back after their calls.
    const first = await slowAndFast();
    const pool = await waitFor(() => (supervisors().length === 2 ? supervisors() : null), 'two supervisors waiting');
    expect(pool.sort()).toEqual([...new Set(first)].sort());
    const again = await slowAndFast();
    for (const pid of again) expect(pool).toContain(pid);
    await ok(s.client, 'kill_sandbox', {});
  });

  it('run_command timeout kills the whole process group', async () => {
    const s = await server();
    await ok(s.client, 'create_sandbox', {});
    const r = await ok(s.client, 'run_command', { command: 'sleep 300 & echo $! > gc.pid; sleep 300', timeout: 1 });
    // TERM to the group (the shell's status says so), KILL after the grace period for whatever ignores it.
    expect(r).toMatchObject({ timed_out: true, exit_code: 143 });
    const pid = Number((await ok(s.client, 'read_file', { path: 'gc.pid' })).content.trim());
    expect(pid).toBeGreaterThan(1);
    // The fake runs sandbox processes on this machine, so the grandchild's fate is visible here.
    await waitFor(() => !isRunning(pid), 'the backgrounded grandchild to be killed');
  });

  it('maps 401/429/503/404 to fixed categories with the status, and no raw message in results or the log', async () => {
    const s = await server();
    const cases: [number, string][] = [
      [401, 'authentication'],
      [429, 'rate_limited'],
      [503, 'unavailable'],
      [404, 'not_found'],
    ];
    for (const [status, category] of cases) {
      e2b.fake.injectFailure({ path: /^\/sandboxes\/[^/]+$/, method: 'GET', status, times: 10 });
      const e = await toolError(s.client, 'get_sandbox', { sandbox_id: 'e2b:someid' });
      e2b.fake.clearFailures();
      expect([e.category, (e as { status?: number }).status], String(status)).toEqual([category, status]);
      expectNoLeak(e.text);
    }

    // Task tools from a fresh server reach envd through the control plane: its failures map too.
    const sb = await ok(s.client, 'create_sandbox', { timeout: 300 });
    const t = await ok(s.client, 'start_task', { command: 'sleep 30' });
    const fresh = await server();
    for (const [status, category] of cases) {
      e2b.fake.injectFailure({ path: `/sandboxes/${rawId(sb.sandbox_id)}`, method: 'GET', status, times: 10 });
      const e = await toolError(fresh.client, 'get_task', { sandbox_id: sb.sandbox_id, task_id: t.task_id });
      e2b.fake.clearFailures();
      expect(e.category, String(status)).toBe(category);
      expectNoLeak(e.text);
    }
    e2b.fake.injectFailure({ path: /\/connect$/, status: 503, times: 10 });
    const busy = await toolError(fresh.client, 'cancel_task', { sandbox_id: sb.sandbox_id, task_id: t.task_id });
    e2b.fake.clearFailures();
    expect(busy.category).toBe('unavailable');
    // envd's REST /files: a failure there maps as well.
    e2b.fake.injectFailure({ path: '/files', status: 507, times: 1 });
    const full = await toolError(s.client, 'write_file', { path: 'x.txt', content: 'x' });
    e2b.fake.clearFailures();
    expect(full.category).toBe('insufficient_resources');
    expectNoLeak(full.text);
    await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });

    const wrongKey = await server({ E2B_API_KEY: 'e2b_wrong_key' });
    const auth = await toolError(wrongKey.client, 'create_sandbox', {});
    expect(auth.category).toBe('authentication');
    expectNoLeak(auth.text);

    const before = e2b.fake.calls.length;
    for (const args of [{ cpu: 2 }, { memory: 1024 }, { region: 'eu' }]) {
      const u = await toolError(s.client, 'create_sandbox', args);
      expect(u.category).toBe('unsupported');
      expect(u.suggestion).toMatch(/template/);
    }
    expect(e2b.fake.calls.length).toBe(before);
    for (const x of [s, fresh, wrongKey]) expectNoLeak(x.stderr());
  });

  it('without E2B_API_KEY the server starts and each call fails with authentication', async () => {
    const before = e2b.fake.calls.length;
    const s = await server({ E2B_API_KEY: '' });
    for (const [name, args] of [
      ['create_sandbox', {}],
      ['list_sandboxes', {}],
      ['get_sandbox', { sandbox_id: 'e2b:abc' }],
      ['get_task', { sandbox_id: 'abc', task_id: '0123456789abcdef0123456789abcdef' }],
      ['run_command', { sandbox_id: 'abc', command: 'true' }],
    ] as const) {
      const e = await toolError(s.client, name, args);
      expect([name, e.category, e.code]).toEqual([name, 'authentication', 'MissingApiKey']);
      expect(e.suggestion).toContain('E2B_API_KEY');
    }
    expect(e2b.fake.calls.length).toBe(before);
  });

  it('takes credentials only from the configuration, never from tool arguments', async () => {
    const s = await server();
    const { tools } = await s.client.listTools();
    for (const tool of tools) {
      const props = Object.keys((tool.inputSchema as { properties?: object }).properties ?? {});
      for (const p of props) expect(p, `${tool.name}.${p}`).not.toMatch(/key|token|secret|password|domain|url|credential/i);
    }
    const before = e2b.fake.calls.length;
    const e = await toolError(s.client, 'create_sandbox', { api_key: 'e2b_fake_test_key' });
    expect(e.category).toBe('invalid_argument');
    expect(e.text).not.toContain('e2b_fake_test_key');
    expect(e2b.fake.calls.length).toBe(before);
  });

  it('tells a failed command that its sandbox has no network (or only its allow-list) when the output shows a network failure, and refuses to expose envd', async () => {
    const s = await server({ SANDBOX_MCP_NETWORK_ALLOW: 'pypi.org' });
    // The fake runs commands on this machine, which resolves no such name: the failure is real, the egress settings are the fake's record.
    const lookup = 'curl -sS http://no-such-host.invalid/';
    const { sandbox_id: none } = await ok(s.client, 'create_sandbox', { timeout: 120, network: 'none' });
    const failed = await ok(s.client, 'run_command', { sandbox_id: none, command: lookup });
    expect(failed.exit_code).toBe(6);
    expect(failed.stderr).toContain(
      "\n[sandbox-mcp] This sandbox has no network (only its own loopback: no DNS, no internet), and this command's output shows a failed name lookup or connection. " +
        'A sandbox gets its network when it is created: create one with network: {"allow_out": [...]} naming what it needs, within what this server permits (pypi.org).',
    );
    expect((await ok(s.client, 'run_command', { sandbox_id: none, command: 'exit 3' })).stderr).toBe('');
    const reserved = await toolError(s.client, 'expose_port', { sandbox_id: none, port: 49983 });
    expect(reserved).toMatchObject({ category: 'invalid_argument', code: 'port_reserved' });
    expect(reserved.text).toContain('port: 49983 is envd');

    const { sandbox_id: listed } = await ok(s.client, 'create_sandbox', { timeout: 120, network: { allow_out: ['pypi.org'] } });
    expect((await ok(s.client, 'run_command', { sandbox_id: listed, command: lookup })).stderr).toContain(
      '\n[sandbox-mcp] This sandbox reaches only pypi.org (its network.allow_out; everything else is blocked)',
    );
    // E2B's own default (internet access) explains nothing.
    const { sandbox_id: open } = await ok(s.client, 'create_sandbox', { timeout: 120 });
    expect((await ok(s.client, 'run_command', { sandbox_id: open, command: lookup })).stderr).not.toContain('[sandbox-mcp]');
  });

  it('pages list_sandboxes across several fake pages by offset, with the status filter', async () => {
    const f = await startFakeE2b({ pageSize: 2 });
    try {
      const s = await server({}, f);
      const created: string[] = [];
      for (let i = 0; i < 5; i++) created.push((await ok(s.client, 'create_sandbox', {})).sandbox_id);
      f.sandbox(rawId(created[0]!))!.state = 'paused';

      const mark = f.calls.length;
      const all = (await ok(s.client, 'list_sandboxes', {})).sandboxes as Array<Record<string, unknown>>;
      expect(all.map((m) => m.sandbox_id).sort()).toEqual([...created].sort());
      for (const m of all) {
        expect(Object.keys(m).sort()).toEqual(METADATA_KEYS);
        expect(m).toMatchObject({ region: null, disk_size_mb: null });
      }
      // Three pages of at most two, the later two fetched with the server's cursor.
      const pages = f.calls.slice(mark).filter((c) => c.method === 'GET' && c.path.startsWith('/v2/sandboxes'));
      expect(pages.map((c) => c.path.includes('nextToken='))).toEqual([false, true, true]);

      const page = await ok(s.client, 'list_sandboxes', { limit: 3, offset: 1 });
      expect(page).toMatchObject({ limit: 3, offset: 1 });
      expect(page.sandboxes.map((m: { sandbox_id: string }) => m.sandbox_id)).toEqual(all.slice(1, 4).map((m) => m.sandbox_id));
      expect(
        (await ok(s.client, 'list_sandboxes', { limit: 2, offset: 4 })).sandboxes.map((m: { sandbox_id: string }) => m.sandbox_id),
      ).toEqual([all[4]!.sandbox_id]);
      expect((await ok(s.client, 'list_sandboxes', { offset: 5 })).sandboxes).toEqual([]);

      const running = (await ok(s.client, 'list_sandboxes', { status: 'running' })).sandboxes.map(
        (m: { sandbox_id: string }) => m.sandbox_id,
      );
      expect(running.sort()).toEqual(created.slice(1).sort());
      const paused = (await ok(s.client, 'list_sandboxes', { status: 'paused' })).sandboxes;
      expect(paused.map((m: { sandbox_id: string; status: string }) => [m.sandbox_id, m.status])).toEqual([[created[0], 'paused']]);
      // Listing adopts nothing: the session still kills exactly what it created.
      await s.close();
      expect(f.calls.filter((c) => c.method === 'DELETE').length).toBe(5);
    } finally {
      await f.close();
    }
  });
});
