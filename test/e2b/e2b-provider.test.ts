// The e2b provider with the real `e2b` SDK against the in-repo fake of E2B (test/e2b-fake).
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createE2bProvider } from '../../host/providers/e2b/e2b-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { isProviderError, type ProviderError } from '../../host/providers/provider-error.js';
import { FAKE_DISK_BYTES, FAKE_MEMORY_BYTES, SANDBOX_MARKER_VAR, startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { isRunning } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

let fake: FakeE2b;
let provider: Provider;

function providerFor(f: FakeE2b, extra: { apiKey?: string } = {}): Provider {
  return createE2bProvider({ apiKey: extra.apiKey ?? f.apiKey, apiUrl: f.apiUrl, sandboxUrl: f.sandboxUrl, killGraceS: 1 });
}

async function caught(p: Promise<unknown>): Promise<ProviderError> {
  try {
    await p;
  } catch (e) {
    if (isProviderError(e)) return e;
    throw new Error(`not a ProviderError: ${String((e as Error)?.name)}`, { cause: e });
  }
  throw new Error('expected a failure');
}

function assertNoLeak(err: ProviderError): void {
  const text = `${err.message}\n${JSON.stringify(err)}\n${err.stack ?? ''}`;
  expect(text).not.toContain('FAKE-RAW-MESSAGE');
  expect(text).not.toContain(fake.url);
  expect(text).not.toMatch(/https?:\/\//);
  expect(err.message).toBe(err.suggestion);
}

/** Live (not zombie) host processes of a fake sandbox, as [pid, argv joined by spaces]. */
function sandboxProcesses(sandboxId: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (!readFileSync(`/proc/${name}/environ`, 'latin1').split('\0').includes(`${SANDBOX_MARKER_VAR}=${sandboxId}`)) continue;
      if (!isRunning(Number(name))) continue;
      out.push([Number(name), readFileSync(`/proc/${name}/cmdline`, 'latin1').split('\0').join(' ').trim()]);
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Resolves `p`, or fails if it has not settled within a bound far above its expected time. */
async function within<T>(p: Promise<T>, boundMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not settled within ${boundMs} ms`)), boundMs);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

beforeAll(async () => {
  fake = await startFakeE2b();
  provider = providerFor(fake);
});

afterAll(async () => {
  await provider.close();
  await fake.close();
});

describe('e2b provider against the fake', () => {
  test('create → exec → files → getInfo → setTimeout → kill', async () => {
    const meta = await provider.create({ template: 'base', timeoutS: 120, envs: { GREETING: 'hello' } });
    expect(Object.keys(meta).sort()).toEqual(
      ['cpu_count', 'disk_size_mb', 'end_at', 'memory_mb', 'region', 'sandbox_id', 'started_at', 'status', 'template'].sort(),
    );
    expect(meta).toMatchObject({ template: 'base', status: 'running', region: null, disk_size_mb: null, cpu_count: 2, memory_mb: 512 });
    expect(meta.sandbox_id).not.toContain(':');
    const id = meta.sandbox_id;

    // exec: stdout, stderr, create envs + per-call envs, cwd relative to home, HOME set.
    expect((await provider.exec(id, 'mkdir -p sub', { timeoutS: 10 })).exitCode).toBe(0);
    const r = await provider.exec(id, 'echo "$GREETING $EXTRA"; echo oops >&2; test "$PWD" = "$HOME/sub" && echo in-sub', {
      timeoutS: 10,
      envs: { EXTRA: 'world' },
      cwd: 'sub',
    });
    expect(r).toMatchObject({ exitCode: 0, timedOut: false });
    expect(r.stdout.toString()).toBe('hello world\nin-sub\n');
    expect(r.stderr.toString()).toBe('oops\n');

    // Fast commands return at once (a lingering watchdog would hold the output open for an hour).
    for (let i = 0; i < 5; i++) expect((await provider.exec(id, 'true', { timeoutS: 3600 })).stderr.toString()).toBe('');
    expect((await caught(provider.exec(id, 'pwd', { timeoutS: 5, cwd: 'no/such/dir' }))).category).toBe('invalid_argument');
    const nonzero = await provider.exec(id, 'echo partial; exit 7', { timeoutS: 10 });
    expect(nonzero).toMatchObject({ exitCode: 7, timedOut: false, stdoutTruncated: false });
    expect(nonzero.stdout.toString()).toBe('partial\n');

    const stdin = await provider.exec(id, 'wc -c; cat', { timeoutS: 10, stdin: Buffer.from('abc') });
    expect(stdin.stdout.toString().trim()).toBe('3');

    const capped = await provider.exec(id, 'head -c 100000 /dev/zero | tr "\\0" x; echo; echo END', { timeoutS: 10, maxOutputBytes: 1000 });
    expect(capped).toMatchObject({ stdoutTruncated: true, stdoutHeadBytes: 500, stderrHeadBytes: 0 });
    expect(capped.stdout.length).toBe(1000);
    expect(capped.stdout.toString()).toMatch(/END\n$/);

    // timeout kills the command's whole process group: the backgrounded grandchild is gone too.
    // TMPDIR points the wrapper's marker file into this sandbox's home, where leftovers are visible.
    const tmpdirEnv = { TMPDIR: fake.sandbox(id)!.home };
    const t = await provider.exec(id, 'sleep 300 & echo $! > gc.pid; sleep 300', { timeoutS: 1, envs: tmpdirEnv });
    expect(t).toMatchObject({ timedOut: true, exitCode: 143 });
    // One that ends in time, its timeout far off (the same wrapper and marker; 1 s once, which a
    // loaded machine's wrapper start alone could spend).
    expect((await provider.exec(id, 'true', { timeoutS: 30, envs: tmpdirEnv })).exitCode).toBe(0);
    expect(readdirSync(fake.sandbox(id)!.home).filter((n) => n.startsWith('.sandbox-mcp-timeout'))).toEqual([]);
    // The wrapper's own job reports ("Terminated", "Killed") never reach the command's stderr.
    expect(t.stderr.toString()).toBe('');
    const gc = Number((await provider.readFile(id, 'gc.pid')).data.toString().trim());
    expect(gc).toBeGreaterThan(1);
    await waitFor(() => !isRunning(gc), 'the grandchild to end');

    // Completion cleans descendants left in the command's group (they would hold the output open).
    const left = await provider.exec(id, 'sleep 300 & echo $!', { timeoutS: 30 });
    expect(left).toMatchObject({ exitCode: 0, timedOut: false });
    await waitFor(() => !isRunning(Number(left.stdout.toString().trim())), 'the leftover sleep to end');

    // files: binary round trip, relative and absolute paths, parents created, offset/length, append.
    const bin = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7 + 3) % 256));
    expect(await provider.writeFile(id, 'data/deep/blob.bin', bin)).toEqual({ size: bin.length });
    const whole = await provider.readFile(id, '/home/user/data/deep/blob.bin');
    expect(whole.size).toBe(bin.length);
    expect(whole.data.equals(bin)).toBe(true);
    const slice = await provider.readFile(id, 'data/deep/blob.bin', { offset: 65_530, length: 100 });
    expect(slice.data.equals(bin.subarray(65_530, 65_630))).toBe(true);
    expect(slice.size).toBe(bin.length);
    const tail = Buffer.from([0, 255, 10, 13]);
    expect(await provider.writeFile(id, 'data/deep/blob.bin', tail, { append: true })).toEqual({ size: bin.length + 4 });
    const appended = await provider.readFile(id, 'data/deep/blob.bin', { offset: bin.length });
    expect(appended.data.equals(tail)).toBe(true);
    expect(await provider.writeFile(id, 'new/dir/appended.txt', Buffer.from('x'), { append: true })).toEqual({ size: 1 });

    const listed = await provider.listFiles(id, 'data', { depth: 2, maxEntries: 100 });
    expect(listed.map((e) => [e.path, e.type])).toEqual([
      ['/home/user/data/deep', 'directory'],
      ['/home/user/data/deep/blob.bin', 'file'],
    ]);
    expect(listed[1]!.size).toBe(bin.length + 4);
    expect(listed[1]!.modified_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await provider.listFiles(id, '/home/user', { depth: 3, maxEntries: 2 })).toHaveLength(2);
    expect((await caught(provider.readFile(id, 'missing.txt'))).category).toBe('not_found');
    expect((await caught(provider.readFile(id, 'data'))).category).toBe('invalid_argument');

    // getInfo and setTimeout (static calls, no connect).
    const before = await provider.getInfo(id);
    expect(before.sandbox_id).toBe(id);
    await provider.setTimeout(id, 3600);
    const after = await provider.getInfo(id);
    expect(Date.parse(after.end_at!) - Date.parse(before.end_at!)).toBeGreaterThan(3000 * 1000);
    expect(fake.calls.some((c) => c.path === `/sandboxes/${id}/timeout` && (c.body as { timeout: number }).timeout === 3600)).toBe(true);

    await provider.kill(id);
    const gone = await caught(provider.getInfo(id));
    expect(gone).toMatchObject({ category: 'not_found', status: 404 });
    expect((await caught(provider.kill(id))).category).toBe('not_found');
    expect((await caught(provider.exec(id, 'true', { timeoutS: 5 }))).category).toBe('not_found');
  });

  test('a cancelled exec kills the whole process group and resolves with the output so far', async () => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 120 });
    try {
      const sleeps = () => sandboxProcesses(id).filter(([, argv]) => /^sleep 30[01]$/.test(argv));
      const ac = new AbortController();
      const running = provider.exec(id, 'echo started; sleep 300 & sleep 301; wait', { timeoutS: 600, signal: ac.signal });
      await waitFor(() => sleeps().length === 2, 'both sleeps to run');
      const pids = sleeps().map(([pid]) => pid);
      ac.abort();
      // Both sleeps would keep it running for 300 s; the bound is far above the grace period, and
      // above what a cancel (a second envd command, the wrapper's TERM) takes on a loaded machine.
      const r = await within(running, 45_000);
      expect(r).toMatchObject({ exitCode: 143, timedOut: false });
      expect(r.stdout.toString()).toBe('started\n');
      expect(r.stderr.toString()).toBe('');
      // The wrapper waits until the group is empty before it reports.
      expect(sandboxProcesses(id).filter(([pid]) => pids.includes(pid))).toEqual([]);

      // A command that ignores TERM gets KILL once the grace period (1 s here) has passed.
      const stubborn = new AbortController();
      const ignoring = provider.exec(id, 'trap "" TERM; sleep 301 & sleep 300; wait', { timeoutS: 600, signal: stubborn.signal });
      await waitFor(() => sleeps().length === 2, 'both sleeps to run');
      stubborn.abort();
      expect(await within(ignoring, 45_000)).toMatchObject({ exitCode: 137, timedOut: false });
      expect(sleeps()).toEqual([]);

      // An abort after the command finished changes nothing.
      const late = new AbortController();
      expect(await provider.exec(id, 'echo done', { timeoutS: 10, signal: late.signal })).toMatchObject({ exitCode: 0, timedOut: false });
      late.abort();
      expect((await provider.exec(id, 'echo still', { timeoutS: 10 })).stdout.toString()).toBe('still\n');
    } finally {
      await provider.kill(id);
    }
  }, 120_000);

  test('a cancelled exec whose wrapper cannot be reached gives up after the grace period, exit code unknown', async () => {
    // The per-call wrapper (no resident agent): its cancel is a second envd command.
    const quick = createE2bProvider({
      apiKey: fake.apiKey,
      apiUrl: fake.apiUrl,
      sandboxUrl: fake.sandboxUrl,
      killGraceS: 1,
      cancelSettleMs: 300,
      residentAgent: false,
    });
    const { sandbox_id: id } = await quick.create({ timeoutS: 60 });
    try {
      const ac = new AbortController();
      const running = quick.exec(id, 'echo started; exec sleep 32', { timeoutS: 600, signal: ac.signal, stdin: Buffer.alloc(0) });
      await waitFor(() => sandboxProcesses(id).some(([, argv]) => argv === 'sleep 32'), 'the command to run');
      // envd refuses the command that would signal the wrapper.
      fake.injectFailure({ path: '/process.Process/Start', status: 503, times: 1 });
      ac.abort();
      const r = await within(running, 15_000);
      expect(r).toMatchObject({ exitCode: null, timedOut: false });
      expect(r.stdout.toString()).toBe('started\n');
    } finally {
      fake.clearFailures();
      await quick.kill(id);
      await quick.close();
    }
  });

  test('an exec cancelled before it started runs nothing and fails with conflict/cancelled', async () => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 60 });
    try {
      const mark = fake.envdCalls.length;
      const err = await caught(provider.exec(id, 'touch ran', { timeoutS: 10, signal: AbortSignal.abort() }));
      expect(err).toMatchObject({ category: 'conflict', code: 'cancelled' });
      expect(err.message).toBe('The call was cancelled before the command started.');
      expect(fake.envdCalls.slice(mark)).toEqual([]);
      expect(existsSync(`${fake.sandbox(id)!.home}/ran`)).toBe(false);
    } finally {
      await provider.kill(id);
    }
  });

  test('the sandbox deadline removes it and kills its processes', async () => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 120 });
    // Its own session escapes exec's group cleanup; wait until it has one before returning.
    const escape = `setsid bash -c 'echo $$ > "$HOME/escaped.pid"; exec sleep 300' >/dev/null 2>&1 &
      while [ ! -s "$HOME/escaped.pid" ]; do sleep 0.01; done; cat "$HOME/escaped.pid"`;
    const r = await provider.exec(id, escape, { timeoutS: 30 });
    const pid = Number(r.stdout.toString().trim());
    expect(isRunning(pid)).toBe(true);
    // The deadline is armed only now: a lifetime given at create could end before a loaded
    // machine has run the command above.
    await provider.setTimeout(id, 1);
    await waitFor(() => !isRunning(pid), 'the escaped process to end at the deadline');
    expect((await caught(provider.getInfo(id))).category).toBe('not_found');
  });

  test('list walks the paginator with offset/limit and filters by status', async () => {
    const f = await startFakeE2b({ pageSize: 2 });
    const p = providerFor(f);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await p.create({ timeoutS: 60 })).sandbox_id);
      f.sandbox(ids[0]!)!.state = 'paused';
      const all = await p.list({ limit: 100, offset: 0 });
      expect(all.map((s) => s.sandbox_id).sort()).toEqual([...ids].sort());
      const pageCalls = f.calls.filter((c) => c.method === 'GET' && c.path.startsWith('/v2/sandboxes'));
      expect(pageCalls.length).toBe(3);
      expect(pageCalls.filter((c) => c.path.includes('nextToken=')).length).toBe(2);

      const window = await p.list({ limit: 2, offset: 1 });
      expect(window.map((s) => s.sandbox_id)).toEqual(all.slice(1, 3).map((s) => s.sandbox_id));
      expect(await p.list({ limit: 10, offset: 5 })).toEqual([]);

      const running = await p.list({ status: 'running', limit: 100, offset: 0 });
      expect(running.map((s) => s.sandbox_id).sort()).toEqual(ids.slice(1).sort());
      const paused = await p.list({ status: 'paused', limit: 100, offset: 0 });
      expect(paused.map((s) => [s.sandbox_id, s.status])).toEqual([[ids[0], 'paused']]);
      expect(f.calls.some((c) => c.path.includes('state=paused'))).toBe(true);

      const before = f.calls.length;
      expect((await caught(p.list({ status: 'stopped', limit: 1, offset: 0 }))).category).toBe('invalid_argument');
      expect((await caught(p.list({ region: 'eu', limit: 1, offset: 0 }))).category).toBe('unsupported');
      expect(f.calls.length).toBe(before);
    } finally {
      await p.close();
      await f.close();
    }
  });

  test('SDK failures map to fixed categories with no raw message', async () => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 60 });

    const auth = await caught(providerFor(fake, { apiKey: 'e2b_wrong' }).getInfo(id));
    expect(auth).toMatchObject({ category: 'authentication', status: 401, code: 'AuthenticationError' });
    assertNoLeak(auth);

    fake.injectFailure({ path: `/sandboxes/${id}`, method: 'GET', status: 401, times: 1 });
    assertNoLeak(await caught(provider.getInfo(id)));

    fake.injectFailure({ path: '/v2/sandboxes', method: 'GET', status: 429, times: 1 });
    const limited = await caught(provider.list({ limit: 10, offset: 0 }));
    expect(limited).toMatchObject({ category: 'rate_limited', status: 429, code: 'RateLimitError' });
    assertNoLeak(limited);

    // With an integer Retry-After the SDK retries by itself and the call succeeds.
    fake.injectFailure({ path: `/sandboxes/${id}`, method: 'GET', status: 429, times: 1, retryAfterS: 0 });
    expect((await provider.getInfo(id)).sandbox_id).toBe(id);

    fake.injectFailure({ path: `/sandboxes/${id}/timeout`, status: 503, times: 1 });
    const busy = await caught(provider.setTimeout(id, 100));
    expect(busy).toMatchObject({ category: 'unavailable', status: 503, code: 'ServiceBusyError' });
    assertNoLeak(busy);

    fake.injectFailure({ path: '/v2/sandboxes', method: 'POST', status: 503, times: 1 });
    assertNoLeak(await caught(provider.create({})));

    fake.injectFailure({ path: `/sandboxes/${id}`, method: 'GET', status: 404, times: 1 });
    const missing = await caught(provider.getInfo(id));
    expect(missing).toMatchObject({ category: 'not_found', status: 404 });
    assertNoLeak(missing);

    const unknown = await caught(provider.setTimeout('nosuchsandbox', 10));
    expect(unknown).toMatchObject({ category: 'not_found', status: 404 });
    assertNoLeak(unknown);

    fake.injectFailure({ path: `/sandboxes/${id}`, method: 'DELETE', status: 500, times: 1 });
    const internal = await caught(provider.kill(id));
    expect(internal).toMatchObject({ category: 'internal', status: 500, code: 'SandboxError' });
    assertNoLeak(internal);

    // envd failures too (the REST /files endpoint).
    fake.injectFailure({ path: '/files', status: 507, times: 1 });
    const full = await caught(provider.writeFile(id, 'f.txt', Buffer.from('x')));
    expect(full).toMatchObject({ category: 'insufficient_resources' });
    assertNoLeak(full);

    await provider.kill(id);
  });

  test('missing API key and unsupported options fail before any call', async () => {
    const saved = process.env.E2B_API_KEY;
    delete process.env.E2B_API_KEY;
    try {
      const before = fake.calls.length;
      const p = createE2bProvider({ apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl });
      const err = await caught(p.getInfo('x'));
      expect(err.category).toBe('authentication');
      expect(err.message).toContain('E2B_API_KEY');
      for (const o of [{ cpu: 2 }, { memoryMb: 1024 }, { region: 'eu-west' }]) {
        const u = await caught(provider.create(o));
        expect(u.category).toBe('unsupported');
        expect(u.message).toMatch(/template/);
      }
      expect(fake.calls.length).toBe(before);
    } finally {
      if (saved !== undefined) process.env.E2B_API_KEY = saved;
    }
  });

  test('a fresh provider instance reaches envd without extending the lifetime', async () => {
    const { sandbox_id: id, end_at } = await provider.create({ timeoutS: 120 });
    const fresh = providerFor(fake);
    try {
      const mark = fake.calls.length;
      await fresh.writeFile(id, 'note.txt', Buffer.from('from a new process'));
      expect((await fresh.readFile(id, 'note.txt')).data.toString()).toBe('from a new process');
      expect((await fresh.exec(id, 'cat note.txt', { timeoutS: 5 })).stdout.toString()).toBe('from a new process');
      const made = fake.calls.slice(mark);
      expect(made.filter((c) => c.path.endsWith('/timeout'))).toEqual([]);
      const connects = made.filter((c) => c.path.endsWith('/connect'));
      expect(connects).toHaveLength(1);
      expect(connects[0]!.extendedLifetime).toBe(false);
      expect((connects[0]!.body as { timeout?: number }).timeout).toBeLessThanOrEqual(120);
      expect((await fresh.getInfo(id)).end_at).toBe(end_at);
      // The instance that created the sandbox needs neither connect nor getInfo for envd.
      const mark2 = fake.calls.length;
      await provider.exec(id, 'true', { timeoutS: 5 });
      expect(fake.calls.length).toBe(mark2);
    } finally {
      await fresh.close();
      await provider.kill(id);
    }
  });
  test("usage reads E2B's metrics (memory, disk against their totals; no process count) from the control plane alone: no connect, no lifetime change", async () => {
    const { sandbox_id: id, end_at } = await provider.create({ timeoutS: 120 });
    const fresh = providerFor(fake);
    try {
      const mark = fake.calls.length;
      const before = await fresh.usage!(id);
      expect(before).toMatchObject({ memoryBytes: { limit: FAKE_MEMORY_BYTES }, processes: null, diskBytes: { limit: FAKE_DISK_BYTES } });
      // A 3 MiB file shows in the disk figure (the fake measures the sandbox's files).
      await provider.writeFile(id, 'big.bin', Buffer.alloc(3 * 1024 * 1024, 1));
      const after = await fresh.usage!(id);
      expect(after.diskBytes!.used - before.diskBytes!.used).toBeGreaterThanOrEqual(3 * 1024 * 1024);
      const asked = fake.calls.slice(mark).filter((c) => c.path.includes(`/sandboxes/${id}/metrics`));
      expect(asked).toHaveLength(2);
      // Only the recent samples are asked for, not every one since the sandbox started.
      expect(Number(new URL(asked[0]!.path, fake.url).searchParams.get('start'))).toBeGreaterThan(Date.now() / 1000 - 600);
      const byFresh = fake.calls.slice(mark).filter((c) => !c.path.includes('/metrics'));
      expect(byFresh.filter((c) => /\/(connect|timeout)$/.test(c.path))).toEqual([]);
      expect((await fresh.getInfo(id)).end_at).toBe(end_at);
      expect(await caught(fresh.usage!('nosuchsandbox'))).toMatchObject({ category: 'not_found' });
    } finally {
      await fresh.close();
      await provider.kill(id);
    }
  });

  test('the connection cache is bounded; an evicted sandbox reconnects without extension', async () => {
    const small = createE2bProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl, maxConnections: 1 });
    try {
      const a = (await small.create({ timeoutS: 60 })).sandbox_id;
      const b = (await small.create({ timeoutS: 60 })).sandbox_id;
      const mark = fake.calls.length;
      await small.exec(b, 'true', { timeoutS: 5 });
      expect(fake.calls.length).toBe(mark);
      await small.exec(a, 'true', { timeoutS: 5 });
      const connects = fake.calls.slice(mark).filter((c) => c.path.endsWith('/connect'));
      expect(connects.map((c) => [c.path, c.extendedLifetime])).toEqual([[`/v2/sandboxes/${a}/connect`, false]]);
      await small.kill(a);
      await small.kill(b);
    } finally {
      await small.close();
    }
  });

  test('a sandbox killed elsewhere is not_found for exec and file calls (envd says 502, not a timeout)', async () => {
    const other = providerFor(fake);
    try {
      const results: Array<[string, string | undefined, number | undefined]> = [];
      const ops: Array<[string, (id: string) => Promise<unknown>]> = [
        ['exec', (id) => provider.exec(id, 'true', { timeoutS: 5 })],
        ['readFile', (id) => provider.readFile(id, 'x')],
        ['writeFile', (id) => provider.writeFile(id, 'x', Buffer.from('y'))],
        ['listFiles', (id) => provider.listFiles(id, '.', { depth: 1, maxEntries: 5 })],
      ];
      for (const [name, op] of ops) {
        const { sandbox_id: id } = await provider.create({ timeoutS: 60 });
        // This instance holds a live envd connection; another process kills the sandbox.
        await provider.exec(id, 'true', { timeoutS: 5 });
        await other.kill(id);
        const err = await caught(op(id));
        assertNoLeak(err);
        results.push([name, err.category, err.status]);
      }
      expect(results).toEqual(ops.map(([name]) => [name, 'not_found', 404]));
    } finally {
      await other.close();
    }
  });

  test('the fake refuses what the E2B API refuses, instead of clamping it', async () => {
    const post = (p: string, body: unknown) =>
      fetch(`${fake.apiUrl}${p}`, {
        method: 'POST',
        headers: { 'X-API-KEY': fake.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    const get = (p: string) => fetch(`${fake.apiUrl}${p}`, { headers: { 'X-API-KEY': fake.apiKey } });
    const { sandbox_id: id } = await provider.create({ timeoutS: 60 });
    try {
      expect((await get('/v2/sandboxes?limit=101')).status).toBe(400);
      expect((await get('/v2/sandboxes?limit=0')).status).toBe(400);
      expect((await get('/v2/sandboxes?state=stopped')).status).toBe(400);
      expect((await post(`/sandboxes/${id}/timeout`, { timeout: 1.5 })).status).toBe(400);
      expect((await post(`/sandboxes/${id}/timeout`, {})).status).toBe(400);
      expect((await post(`/sandboxes/${id}/timeout`, { timeout: 86_401 })).status).toBe(400);
      expect((await post(`/v2/sandboxes/${id}/connect`, { timeout: -1 })).status).toBe(400);
      expect((await post('/v2/sandboxes', { timeout: 60 })).status).toBe(400);
      expect((await post('/v2/sandboxes', { templateID: 'base', envVars: { A: 1 } })).status).toBe(400);
      // Routes outside the spec (and the SDK) do not answer.
      expect((await get(`/v2/sandboxes/${id}`)).status).toBe(404);
      expect((await post(`/v2/sandboxes/${id}/timeout`, { timeout: 10 })).status).toBe(404);
    } finally {
      await provider.kill(id);
    }
  });

  test('a paused sandbox is resumed by the SDK connect path (the platform lifecycle)', async () => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 120 });
    const paused = await fetch(`${fake.apiUrl}/sandboxes/${id}/pause`, { method: 'POST', headers: { 'X-API-KEY': fake.apiKey } });
    expect(paused.status).toBe(204);
    expect((await provider.getInfo(id)).status).toBe('paused');
    const fresh = providerFor(fake);
    try {
      const mark = fake.calls.length;
      expect((await fresh.exec(id, 'echo resumed', { timeoutS: 5 })).stdout.toString()).toBe('resumed\n');
      const connects = fake.calls.slice(mark).filter((c) => c.path.endsWith('/connect'));
      expect(connects.map((c) => c.status)).toEqual([201]);
      expect((await fresh.getInfo(id)).status).toBe('running');
    } finally {
      await fresh.close();
      await provider.kill(id);
    }
  });
});
