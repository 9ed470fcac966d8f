// Lifecycle of local sandboxes against real bubblewrap: create, exec, files, deadlines, kill,
// restart safety (a second provider instance, a server that went away, a keeper that died).
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { isAlive } from '../../host/providers/local/system/proc.js';
import { readKeeperRecord, readSpec, type KeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import type { Provider } from '../../host/providers/provider.js';
import { diskBudgetMb } from '../../host/providers/local/limits/sandbox-limits.js';
import { DEFAULT_DISK_MB, defaultMaxMemoryMb, defaultMemoryMb } from '../../host/providers/local/limits/settings.js';
import { canMakeCgroups } from './fixtures/fake-bwrap.js';
import { cleanNodeEnv, KEEPER_SCRIPT, REPO, sandboxesAvailable, tempStateDir, waitFor } from './helpers.js';

const run = promisify(execFile);

describe.skipIf(!sandboxesAvailable())('local sandbox lifecycle', () => {
  const state = tempStateDir();
  let provider: Provider;
  const created: string[] = [];
  const sandboxDir = (id: string) => join(state.dir, 'local', id);
  const keeperOf = (id: string): KeeperRecord => {
    const rec = readKeeperRecord(sandboxDir(id));
    if (!rec) throw new Error('no keeper record');
    return rec;
  };
  const create = async (opts: Parameters<Provider['create']>[0] = {}) => {
    const meta = await provider.create(opts);
    created.push(meta.sandbox_id);
    return meta;
  };

  beforeAll(() => {
    provider = createLocalProvider({ stateDir: state.dir, keeperScript: KEEPER_SCRIPT });
  });

  afterAll(async () => {
    for (const id of created) await provider.kill(id).catch(() => {});
    await provider.close();
    state.remove();
  });

  it('create → exec → binary file round trip → setTimeout → kill', async () => {
    const before = Date.now();
    const meta = await create({ timeoutS: 60, envs: { GREETING: 'hello' } });
    expect(Object.keys(meta).sort()).toEqual(
      ['cpu_count', 'disk_size_mb', 'end_at', 'memory_mb', 'region', 'sandbox_id', 'started_at', 'status', 'template'].sort(),
    );
    // What holds by default: the default memory limit where a cgroup can be made, the disk budget (capped at half of it).
    const memoryMb = canMakeCgroups() ? Math.min(defaultMemoryMb(), defaultMaxMemoryMb()) : null;
    expect(meta).toMatchObject({
      template: 'base',
      status: 'running',
      region: 'local',
      cpu_count: null,
      memory_mb: memoryMb,
      disk_size_mb: diskBudgetMb(DEFAULT_DISK_MB, memoryMb),
    });
    expect(meta.sandbox_id).toMatch(/^[a-z0-9]{12}$/);
    expect(Date.parse(meta.end_at!) - Date.parse(meta.started_at!)).toBe(60_000);
    expect(Date.parse(meta.started_at!)).toBeGreaterThanOrEqual(before - 1000);
    const id = meta.sandbox_id;

    const r = await provider.exec(id, 'echo "$GREETING $EXTRA"; echo err >&2; pwd; exit 3', { timeoutS: 10, envs: { EXTRA: 'world' } });
    expect(r).toMatchObject({ exitCode: 3, timedOut: false, stdoutTruncated: false, stderrTruncated: false });
    expect(r.stdout.toString()).toBe('hello world\n/home/user\n');
    expect(r.stderr.toString()).toBe('err\n');

    const bytes = Buffer.alloc(256 * 300);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7 + (i >> 8)) & 0xff;
    expect(await provider.writeFile(id, 'data/deep/blob.bin', bytes)).toEqual({ size: bytes.length });
    const back = await provider.readFile(id, '/home/user/data/deep/blob.bin');
    expect(back.size).toBe(bytes.length);
    expect(back.data.equals(bytes)).toBe(true);
    const slice = await provider.readFile(id, 'data/deep/blob.bin', { offset: 1000, length: 300 });
    expect(slice.size).toBe(bytes.length);
    expect(slice.data.equals(bytes.subarray(1000, 1300))).toBe(true);
    expect(await provider.writeFile(id, 'data/deep/blob.bin', Buffer.from([0, 255]), { append: true })).toEqual({ size: bytes.length + 2 });
    const sum = await provider.exec(id, 'sha256sum data/deep/blob.bin | cut -c1-64', { timeoutS: 10 });
    const { createHash } = await import('node:crypto');
    expect(sum.stdout.toString().trim()).toBe(
      createHash('sha256')
        .update(Buffer.concat([bytes, Buffer.from([0, 255])]))
        .digest('hex'),
    );
    expect(await provider.writeFile(id, 'data/empty', Buffer.alloc(0))).toEqual({ size: 0 });

    const entries = await provider.listFiles(id, '.', { depth: 3, maxEntries: 100 });
    expect(entries.map((e) => [e.path, e.type])).toEqual([
      ['/home/user/data', 'directory'],
      ['/home/user/data/deep', 'directory'],
      ['/home/user/data/deep/blob.bin', 'file'],
      ['/home/user/data/empty', 'file'],
    ]);
    expect(entries[2]).toMatchObject({ name: 'blob.bin', size: bytes.length + 2 });
    expect(Date.parse(entries[2]!.modified_at!)).toBeGreaterThan(before - 60_000);
    expect(await provider.listFiles(id, '.', { depth: 1, maxEntries: 100 })).toHaveLength(1);

    await provider.setTimeout(id, 600);
    const info = await provider.getInfo(id);
    const left = Date.parse(info.end_at!) - Date.now();
    expect(left).toBeGreaterThan(500_000);
    expect(left).toBeLessThanOrEqual(600_000);

    const rec = keeperOf(id);
    await provider.kill(id);
    expect(isAlive(rec.pid1)).toBe(false);
    expect(isAlive(rec.keeper)).toBe(false);
    expect(existsSync(sandboxDir(id))).toBe(false);
    await expect(provider.getInfo(id)).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.exec(id, 'true', { timeoutS: 5 })).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.kill(id)).rejects.toMatchObject({ category: 'not_found' });
  });

  it('a 2-second sandbox disappears by itself with no server running', async () => {
    // The "server" is a separate node process that creates the sandbox and exits.
    const out = join(state.dir, 'create-sandbox.mjs');
    await build({
      entryPoints: [join(REPO, 'test/local/fixtures/create-sandbox.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: out,
      logLevel: 'silent',
    });
    const { stdout } = await run(process.execPath, [out, state.dir, KEEPER_SCRIPT, '2'], { env: cleanNodeEnv() });
    const id = (JSON.parse(stdout) as { sandbox_id: string }).sandbox_id;
    created.push(id);
    const rec = keeperOf(id);
    expect(isAlive(rec.pid1)).toBe(true);
    await waitFor(() => !isAlive(rec.keeper) && !isAlive(rec.pid1) && !isAlive(rec.bwrap), 20_000);
    expect(existsSync(sandboxDir(id))).toBe(false);
    await expect(provider.getInfo(id)).rejects.toMatchObject({ category: 'not_found' });
  });

  it('a process started by one exec is visible and signalable from the next', async () => {
    const { sandbox_id: id } = await create();
    // Returns promptly although the daemon keeps running (its output goes nowhere).
    const start = await provider.exec(id, 'setsid sleep 4321 >/dev/null 2>&1 & echo $!', { timeoutS: 10 });
    const pid = start.stdout.toString().trim();
    expect(pid).toMatch(/^\d+$/);
    const seen = await provider.exec(id, `tr '\\0' ' ' < /proc/${pid}/cmdline`, { timeoutS: 10 });
    expect(seen.stdout.toString()).toBe('sleep 4321 ');
    const killed = await provider.exec(
      id,
      `kill -TERM ${pid}; for i in $(seq 100); do [ -e /proc/${pid} ] || break; sleep 0.05; done; [ ! -e /proc/${pid} ]`,
      { timeoutS: 10 },
    );
    expect(killed.exitCode).toBe(0);
  });

  it('a new provider instance lists and execs into a sandbox created by another', async () => {
    const meta = await create({ envs: { FROM_CREATE: 'persisted' } });
    const second = createLocalProvider({ stateDir: state.dir, keeperScript: KEEPER_SCRIPT });
    try {
      const listed = await second.list({ limit: 100, offset: 0 });
      expect(listed).toContainEqual(meta);
      expect(await second.list({ status: 'running', region: 'local', limit: 100, offset: 0 })).toContainEqual(meta);
      expect(await second.list({ status: 'paused', limit: 100, offset: 0 })).toEqual([]);
      expect(await second.list({ region: 'elsewhere', limit: 100, offset: 0 })).toEqual([]);
      const r = await second.exec(meta.sandbox_id, 'echo $FROM_CREATE', { timeoutS: 10 });
      expect(r.stdout.toString()).toBe('persisted\n');
      expect(await second.getInfo(meta.sandbox_id)).toEqual(meta);
    } finally {
      await second.close();
    }
  });

  it('list pages with offset and limit', async () => {
    await create();
    const all = await provider.list({ limit: 100, offset: 0 });
    expect(all.length).toBeGreaterThanOrEqual(2);
    const first = await provider.list({ limit: 1, offset: 0 });
    const second = await provider.list({ limit: 1, offset: 1 });
    expect(first).toEqual([all[0]]);
    expect(second).toEqual([all[1]]);
    expect(await provider.list({ limit: 5, offset: all.length })).toEqual([]);
  });

  it('concurrent creates and racing kills from two instances leave nothing behind', async () => {
    const metas = await Promise.all(Array.from({ length: 4 }, () => create({ timeoutS: 60 })));
    const ids = metas.map((m) => m.sandbox_id);
    expect(new Set(ids).size).toBe(4);
    const uids = ids.map((id) => readSpec(sandboxDir(id))!.identity.uid);
    if (process.getuid?.() === 0) expect(new Set(uids).size).toBe(4);
    const records = ids.map(keeperOf);
    const other = createLocalProvider({ stateDir: state.dir, keeperScript: KEEPER_SCRIPT });
    const outcomes = await Promise.allSettled([
      ...ids.map((id) => provider.kill(id)),
      ...ids.map((id) => other.kill(id)),
      ...ids.map((id) => other.exec(id, 'sleep 20', { timeoutS: 30 })),
    ]);
    // Every call either succeeded or found the sandbox gone; none failed otherwise.
    for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ category: 'not_found' });
    for (const rec of records) expect(isAlive(rec.keeper) || isAlive(rec.pid1) || isAlive(rec.bwrap)).toBe(false);
    for (const id of ids) expect(existsSync(sandboxDir(id))).toBe(false);
    const left = (await provider.list({ limit: 100, offset: 0 })).map((m) => m.sandbox_id);
    for (const id of ids) expect(left).not.toContain(id);
    await other.close();
  });

  it('a sandbox whose keeper was SIGKILLed is cleaned up and reported not_found', async () => {
    const { sandbox_id: id } = await create();
    const rec = keeperOf(id);
    process.kill(rec.keeper.pid, 'SIGKILL');
    await waitFor(() => !isAlive(rec.keeper));
    await expect(provider.getInfo(id)).rejects.toMatchObject({ category: 'not_found' });
    await waitFor(() => !isAlive(rec.pid1) && !isAlive(rec.bwrap));
    expect(existsSync(sandboxDir(id))).toBe(false);
    expect((await provider.list({ limit: 100, offset: 0 })).map((m) => m.sandbox_id)).not.toContain(id);
  });

  it('exec: timeout kills the process group, output is capped, stdin and cwd work', async () => {
    const { sandbox_id: id } = await create();
    // A child in the command's process group (a pipeline member, a background job) dies with it.
    const slow = await provider.exec(id, 'sleep 54321 & sleep 54322 | cat; echo never', { timeoutS: 1 });
    expect(slow).toMatchObject({ timedOut: true, exitCode: 137 });
    expect(slow.stdout.toString()).toBe('');
    const ps = await provider.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 10 });
    expect(ps.stdout.toString()).not.toMatch(/5432[12]/);

    const big = await provider.exec(id, 'head -c 300000 /dev/zero; head -c 5 /dev/zero >&2', { timeoutS: 10, maxOutputBytes: 1000 });
    // The result says where the kept head ends; an untruncated stream is all head.
    expect(big).toMatchObject({ exitCode: 0, stdoutTruncated: true, stderrTruncated: false, stdoutHeadBytes: 500, stderrHeadBytes: 5 });
    expect(big.stdout.length).toBe(1000);
    expect(big.stderr.length).toBe(5);
    // Commands keep the head and the tail of their output (the end is where errors are).
    const ends = await provider.exec(id, 'printf START; head -c 300000 /dev/zero; printf END', { timeoutS: 10, maxOutputBytes: 1000 });
    expect(ends).toMatchObject({ stdoutTruncated: true });
    expect([ends.stdout.length, ends.stdout.subarray(0, 5).toString(), ends.stdout.subarray(-3).toString()]).toEqual([
      1000,
      'START',
      'END',
    ]);

    const echo = await provider.exec(id, 'cat', { timeoutS: 10, stdin: Buffer.from([1, 2, 3, 0, 255]) });
    expect([...echo.stdout]).toEqual([1, 2, 3, 0, 255]);

    await provider.writeFile(id, '/tmp/work/x', Buffer.from('x'));
    const inDir = await provider.exec(id, 'pwd; ls', { timeoutS: 10, cwd: '/tmp/work' });
    expect(inDir.stdout.toString()).toBe('/tmp/work\nx\n');
    const rel = await provider.exec(id, 'pwd', { timeoutS: 10, cwd: '.' });
    expect(rel.stdout.toString()).toBe('/home/user\n');
    await expect(provider.exec(id, 'pwd', { timeoutS: 10, cwd: '/no/such/dir' })).rejects.toMatchObject({
      category: 'invalid_argument',
      code: 'cwd_not_found',
    });

    const signalled = await provider.exec(id, 'kill -TERM $$', { timeoutS: 10 });
    expect(signalled).toMatchObject({ exitCode: 143, timedOut: false });
  });

  it('exec: an aborted signal kills the process group and returns; an already-aborted one starts nothing', async () => {
    const { sandbox_id: id } = await create();
    const processes = async () => (await provider.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 10 })).stdout.toString();
    const ac = new AbortController();
    const running = provider.exec(id, 'sleep 30 & sleep 31; wait', { timeoutS: 50, signal: ac.signal });
    await waitFor(async () => {
      const ps = await processes();
      return ps.includes('sleep 30 ') && ps.includes('sleep 31 ');
    });
    ac.abort();
    // Killed like at a timeout (well before the 50 s one), but not reported as one.
    expect(await running).toMatchObject({ exitCode: 137, timedOut: false });
    const after = await processes();
    expect(after).not.toContain('sleep 30 ');
    expect(after).not.toContain('sleep 31 ');

    const aborted = new AbortController();
    aborted.abort();
    await expect(provider.exec(id, 'touch /tmp/ran', { timeoutS: 10, signal: aborted.signal })).rejects.toMatchObject({
      category: 'conflict',
      code: 'cancelled',
    });
    expect((await provider.exec(id, 'test -e /tmp/ran; echo $?', { timeoutS: 10 })).stdout.toString()).toBe('1\n');
    // A signal aborted after the command finished changes nothing.
    const late = new AbortController();
    const done = await provider.exec(id, 'echo done', { timeoutS: 10, signal: late.signal });
    late.abort();
    expect(done).toMatchObject({ exitCode: 0, timedOut: false });
  }, 30_000);

  it('files: FIFOs, sockets and devices are refused promptly, never written into or read from', async () => {
    const { sandbox_id: id } = await create();
    // No reader: opening it for writing would block until the file operation's own 120 s timeout.
    await provider.exec(id, 'mkfifo /tmp/lonely', { timeoutS: 10 });
    await expect(provider.writeFile(id, '/tmp/lonely', Buffer.from('x'))).rejects.toMatchObject({
      category: 'invalid_argument',
      code: 'ENOTREG',
    });
    await expect(provider.readFile(id, '/tmp/lonely')).rejects.toMatchObject({ category: 'invalid_argument', code: 'ENOTREG' });
    // A reader waits on the FIFO: a write into it would land in /tmp/got.
    await provider.exec(id, 'mkfifo /home/user/pipe && { cat /home/user/pipe > /tmp/got 2>/dev/null & echo $! > /tmp/reader; }', {
      timeoutS: 10,
    });
    await provider.exec(id, "node -e \"require('net').createServer().listen('/tmp/sock')\" >/dev/null 2>&1 &", { timeoutS: 10 });
    await waitFor(async () => (await provider.exec(id, 'test -S /tmp/sock', { timeoutS: 10 })).exitCode === 0);
    const refused = { category: 'invalid_argument', code: 'ENOTREG' };
    for (const path of ['pipe', '/home/user/pipe', '/tmp/sock', '/dev/null']) {
      const err = await provider.writeFile(id, path, Buffer.from('leak')).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toMatchObject(refused);
      expect(JSON.stringify(err)).not.toMatch(/pipe|sock|dev/);
    }
    await expect(provider.writeFile(id, 'pipe', Buffer.from('leak'), { append: true })).rejects.toMatchObject(refused);
    for (const path of ['pipe', '/tmp/sock', '/dev/zero']) await expect(provider.readFile(id, path)).rejects.toMatchObject(refused);
    // A symlink to the FIFO is the FIFO.
    await provider.exec(id, 'ln -s /home/user/pipe /tmp/link', { timeoutS: 10 });
    await expect(provider.writeFile(id, '/tmp/link', Buffer.from('leak'))).rejects.toMatchObject(refused);
    // Nothing reached the reader: end it with an empty write of our own and look.
    const got = await provider.exec(
      id,
      ': > /home/user/pipe; r=$(cat /tmp/reader); while [ -e /proc/$r ]; do sleep 0.02; done; wc -c < /tmp/got; test -p /home/user/pipe && echo fifo',
      { timeoutS: 10 },
    );
    expect(got.stdout.toString()).toBe('0\nfifo\n');
    // Regular files still work, write-only ones included.
    expect(await provider.writeFile(id, 'plain', Buffer.from('abc'))).toEqual({ size: 3 });
    expect(await provider.writeFile(id, 'plain', Buffer.from('de'), { append: true })).toEqual({ size: 5 });
    await provider.exec(id, 'chmod 200 plain', { timeoutS: 10 });
    expect(await provider.writeFile(id, 'plain', Buffer.from('xyz'))).toEqual({ size: 3 });
    expect(await provider.writeFile(id, 'plain', Buffer.from('!'), { append: true })).toEqual({ size: 4 });
    await provider.exec(id, 'chmod 600 plain', { timeoutS: 10 });
    expect((await provider.readFile(id, 'plain')).data.toString()).toBe('xyz!');
  }, 30_000);

  it('a command running when the sandbox is killed reports not_found', async () => {
    const { sandbox_id: id } = await create();
    const running = provider.exec(id, 'sleep 30', { timeoutS: 60 }).then(
      () => null,
      (e: unknown) => e,
    );
    await waitFor(async () =>
      (await provider.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 5 })).stdout.toString().includes('sleep 30'),
    );
    await provider.kill(id);
    expect(await running).toMatchObject({ category: 'not_found' });
  });

  it('kill also ends a command whose shell stopped itself (its nsenter stops too)', async () => {
    const { sandbox_id: id } = await create();
    let outcome: unknown = 'pending';
    const running = provider.exec(id, 'kill -STOP $$', { timeoutS: 50 }).then(
      () => (outcome = 'resolved'),
      (e: unknown) => (outcome = e),
    );
    await waitFor(
      async () => (await provider.exec(id, 'grep -l "^State:.*T (stopped)" /proc/[0-9]*/status', { timeoutS: 5 })).stdout.length > 0,
    );
    await provider.kill(id);
    // Well before the command's own 50 s timeout.
    await waitFor(() => outcome !== 'pending', 20_000);
    await running;
    expect(outcome).toMatchObject({ category: 'not_found' });
  });

  it('moves megabytes both ways and keeps shallow entries first when a listing is capped', async () => {
    const { sandbox_id: id } = await create();
    const big = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
    expect(await provider.writeFile(id, 'big.bin', big)).toEqual({ size: big.length });
    expect(await provider.writeFile(id, 'big.bin', big, { append: true })).toEqual({ size: 2 * big.length });
    const tail = await provider.readFile(id, 'big.bin', { offset: big.length, length: big.length });
    expect(tail.size).toBe(2 * big.length);
    expect(tail.data.equals(big)).toBe(true);
    await provider.exec(id, 'mkdir -p a/deep && for i in $(seq 50); do : > a/deep/f$i; done; : > z1; : > z2', { timeoutS: 10 });
    const capped = await provider.listFiles(id, '.', { depth: 3, maxEntries: 5 });
    expect(capped).toHaveLength(5);
    // All four top-level entries come before anything deeper.
    for (const name of ['a', 'big.bin', 'z1', 'z2']) expect(capped.map((e) => e.name)).toContain(name);
  });

  it('maps failures to fixed categories without host details', async () => {
    const { sandbox_id: id } = await create();
    await expect(provider.readFile(id, 'missing.txt')).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.readFile(id, '/tmp')).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.readFile(id, '/etc/shadow')).rejects.toMatchObject({ category: 'permission_denied' });
    await expect(provider.listFiles(id, 'missing', { depth: 1, maxEntries: 10 })).rejects.toMatchObject({ category: 'not_found' });
    await provider.writeFile(id, 'file', Buffer.from('x'));
    await expect(provider.writeFile(id, 'file/below', Buffer.from('x'))).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.writeFile(id, '/tmp', Buffer.from('x'))).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.getInfo('nosuchsandbx')).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.getInfo('../../../etc')).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.create({ template: 'python' })).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.create({ region: 'us-east-1' })).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.create({ timeoutS: 86_401 })).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.setTimeout(id, 0)).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.exec(id, 'true', { timeoutS: 5, envs: { 'BAD=NAME': 'x' } })).rejects.toMatchObject({
      category: 'invalid_argument',
    });
    const err = await provider.readFile(id, 'missing.txt').catch((e: Error) => e);
    expect(String((err as Error).message)).not.toContain(state.dir);
    expect(JSON.stringify(err)).not.toContain('/home/user/missing.txt');
  });

  it('enforces cpu/memory with a cgroup where it can, and says why where it cannot', async () => {
    let meta;
    try {
      meta = await create({ cpu: 1, memoryMb: 96 });
    } catch (e) {
      // Without a cgroup the keeper may create (non-root on cgroup v1, no delegation), it must say so.
      expect(e).toMatchObject({ category: 'unsupported' });
      expect((e as Error).message).toMatch(/cgroup/);
      // Root with cgroup v1 cpu and memory controllers (this kind of machine) always can.
      const v1 = readFileSync('/proc/self/mounts', 'utf8')
        .split('\n')
        .filter((l) => l.split(' ')[2] === 'cgroup');
      const hasV1 = (c: string) => v1.some((l) => (l.split(' ')[3] ?? '').split(',').includes(c));
      expect(process.getuid?.() === 0 && hasV1('cpu') && hasV1('memory')).toBe(false);
      return;
    }
    expect(meta).toMatchObject({ cpu_count: 1, memory_mb: 96 });
    const id = meta.sandbox_id;
    // The command itself runs inside the limit: a memory hog is OOM-killed, the sandbox lives on.
    const hog = await provider.exec(id, 'node -e "const a = []; for (;;) a.push(Buffer.alloc(1 << 20, 1))"', { timeoutS: 60 });
    expect(hog.exitCode).toBe(137);
    expect((await provider.exec(id, 'echo ok', { timeoutS: 10 })).stdout.toString()).toBe('ok\n');
    const rec = keeperOf(id);
    expect(rec.cgroups.length).toBeGreaterThan(0);
    await provider.kill(id);
    for (const dir of rec.cgroups) expect(existsSync(dir)).toBe(false);
    expect(readFileSync('/proc/self/cgroup', 'utf8')).not.toContain(id);
  });
});
