// Lifecycle of local sandboxes against real bubblewrap: create, deadlines, kill, listing, and
// restart safety (a second provider instance, a server that went away, a keeper that died).
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { identify, isAlive, netNamespace, processesInNetNamespace } from '../../host/providers/local/system/proc.js';
import { isMarkedEnding } from '../../host/providers/local/sandbox/registry.js';
import { readEndingMark, readSpec, writeEndingMark } from '../../host/providers/local/sandbox/state-dir.js';
import type { Provider } from '../../host/providers/provider.js';
import { diskBudgetMb } from '../../host/providers/local/limits/sandbox-limits.js';
import { DEFAULT_DISK_MB, defaultMaxMemoryMb, defaultMemoryMb } from '../../host/providers/local/limits/settings.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { canFreezeProcesses, freezeProcesses } from '../support/freeze-process.js';
import { cleanNodeEnv, localSandboxes } from '../support/local-sandboxes.js';
import { holdNamespace } from '../support/processes.js';
import { FIXTURES, KEEPER_SCRIPT } from '../support/paths.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);

const local = localSandboxes();
const { create, keeperOf, sandboxDir } = local;
let provider: Provider;
beforeAll(() => {
  provider = local.provider;
});

describe('local sandbox lifecycle', () => {
  it('create → exec → binary file round trip → setTimeout → kill', async () => {
    const before = Date.now();
    const meta = await create({ timeoutS: 60, envs: { GREETING: 'hello' } });
    expect(Object.keys(meta).sort()).toEqual(
      ['cpu_count', 'disk_size_mb', 'end_at', 'memory_mb', 'region', 'sandbox_id', 'started_at', 'status', 'template'].sort(),
    );
    // What holds by default: the default memory limit where a cgroup can be made, the disk budget (capped at half of it).
    const memoryMb = cgroupSituation().canLimit ? Math.min(defaultMemoryMb(), defaultMaxMemoryMb()) : null;
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

    // The home also holds the agent's own dot directories (its file, its state): the test's files are the rest.
    const ours = (list: Awaited<ReturnType<typeof provider.listFiles>>) => list.filter((e) => !e.path.startsWith('/home/user/.'));
    const entries = ours(await provider.listFiles(id, '.', { depth: 3, maxEntries: 100 }));
    expect(entries.map((e) => [e.path, e.type])).toEqual([
      ['/home/user/data', 'directory'],
      ['/home/user/data/deep', 'directory'],
      ['/home/user/data/deep/blob.bin', 'file'],
      ['/home/user/data/empty', 'file'],
    ]);
    expect(entries[2]).toMatchObject({ name: 'blob.bin', size: bytes.length + 2 });
    expect(Date.parse(entries[2]!.modified_at!)).toBeGreaterThan(before - 60_000);
    expect(ours(await provider.listFiles(id, '.', { depth: 1, maxEntries: 100 }))).toHaveLength(1);

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
    // The "server" is a separate node process that creates the sandbox and exits. It gives it a
    // lifetime long enough to be seen alive after that exit, however loaded the machine; the test
    // then moves the deadline to 2 s from now, and only the keeper is there to act on it.
    const out = join(local.stateDir, 'create-sandbox.mjs');
    await build({
      entryPoints: [join(FIXTURES, 'create-sandbox.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      outfile: out,
      logLevel: 'silent',
    });
    const { stdout } = await run(process.execPath, [out, local.stateDir, KEEPER_SCRIPT, '120'], { env: cleanNodeEnv() });
    const id = (JSON.parse(stdout) as { sandbox_id: string }).sandbox_id;
    local.created.push(id);
    const rec = keeperOf(id);
    expect(isAlive(rec.pid1)).toBe(true);
    await provider.setTimeout(id, 2);
    await waitFor(() => !isAlive(rec.keeper) && !isAlive(rec.pid1) && !isAlive(rec.bwrap), 'the sandbox to end at its deadline');
    expect(existsSync(sandboxDir(id))).toBe(false);
    await expect(provider.getInfo(id)).rejects.toMatchObject({ category: 'not_found' });
  });

  it('a new provider instance lists and execs into a sandbox created by another', async () => {
    const meta = await create({ envs: { FROM_CREATE: 'persisted' } });
    const second = createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT });
    try {
      const listed = await second.list({ limit: 100, offset: 0 });
      expect(listed).toContainEqual(meta);
      expect(await second.list({ status: 'running', region: 'local', limit: 100, offset: 0 })).toContainEqual(meta);
      expect(await second.list({ status: 'paused', limit: 100, offset: 0 })).toEqual([]);
      expect(await second.list({ region: 'elsewhere', limit: 100, offset: 0 })).toEqual([]);
      const r = await second.exec(meta.sandbox_id, 'echo $FROM_CREATE', { timeoutS: 10 });
      expect(r.stdout.toString()).toBe('persisted\n');
      expect(await second.getInfo(meta.sandbox_id)).toEqual(meta);
      // A deadline another instance sets is what this one reports at once, each time: it keeps the
      // deadline it read while the file stays the same one, and reads it again once it changed.
      for (const timeoutS of [700, 650]) {
        await provider.setTimeout(meta.sandbox_id, timeoutS);
        const endAt = Date.parse((await second.getInfo(meta.sandbox_id)).end_at!);
        expect(Math.abs(endAt - (Date.now() + timeoutS * 1000))).toBeLessThan(10_000);
        // A renewal's look (no /proc reads once verified) sees the new deadline as well.
        expect(await second.lifetimeEnd!(meta.sandbox_id)).toBe((await second.getInfo(meta.sandbox_id)).end_at);
      }
    } finally {
      await second.close();
    }
  });

  it("lifetimeEnd, a renewal's look, is getInfo's end_at while the sandbox lives and not_found once another instance killed it", async () => {
    const { sandbox_id: id } = await create();
    const second = createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT });
    try {
      // Verified once by each instance (a first look is inspect's), then read from the deadline alone.
      expect(await second.lifetimeEnd!(id)).toBe((await second.getInfo(id)).end_at);
      await provider.setTimeout(id, 800);
      expect(await second.lifetimeEnd!(id)).toBe((await provider.getInfo(id)).end_at);
      await provider.kill(id);
      await expect(second.lifetimeEnd!(id)).rejects.toMatchObject({ category: 'not_found' });
      await expect(provider.lifetimeEnd!(id)).rejects.toMatchObject({ category: 'not_found' });
      await expect(provider.lifetimeEnd!('nosuchsandbx')).rejects.toMatchObject({ category: 'not_found' });
      await expect(provider.lifetimeEnd!('../../../etc')).rejects.toMatchObject({ category: 'not_found' });
    } finally {
      await second.close();
    }
  });

  it('list pages with offset and limit', async () => {
    // Two of its own: the test does not count on sandboxes earlier tests left.
    await create();
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
    const other = createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT });
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

  // A kill's keeper removes the cgroups once bwrap has exited, which can be a moment before the
  // SIGKILLed pid 1 (outside them) is seen gone: a command entering then found no cgroup.procs
  // and failed as internal (fresh-clone CI, Node 26, the racing-kills test above). The cgroups are
  // removed by hand here, between commands (nothing is in them), to hold that moment still. The
  // sandbox has no resident agent: one lives in the cgroups (rmdir would fail with EBUSY), and at
  // a kill it is gone with pid 1's namespace before the keeper removes them.
  it.runIf(cgroupSituation().canLimit)(
    'a command entering a sandbox whose cgroups are gone finds it not_found, not an internal error',
    async () => {
      const bare = createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT, residentAgent: false });
      try {
        const { sandbox_id: id } = await bare.create({ timeoutS: 60, cpu: 1, memoryMb: 64 });
        const rec = keeperOf(id);
        expect(rec.cgroups.length).toBeGreaterThan(0);
        expect((await bare.exec(id, 'echo in', { timeoutS: 10 })).stdout.toString()).toBe('in\n');
        for (const dir of rec.cgroups) rmdirSync(dir);
        expect(isAlive(rec.pid1) && isAlive(rec.keeper)).toBe(true);
        await expect(bare.exec(id, 'echo in', { timeoutS: 10 })).rejects.toMatchObject({ category: 'not_found' });
        await bare.kill(id);
        expect(existsSync(sandboxDir(id))).toBe(false);
      } finally {
        await bare.close();
      }
    },
  );

  it('a sandbox whose keeper was SIGKILLed is cleaned up and reported not_found', async () => {
    const { sandbox_id: id } = await create();
    const rec = keeperOf(id);
    process.kill(rec.keeper.pid, 'SIGKILL');
    await waitFor(() => !isAlive(rec.keeper), 'the keeper to die');
    await expect(provider.getInfo(id)).rejects.toMatchObject({ category: 'not_found' });
    await waitFor(() => !isAlive(rec.pid1) && !isAlive(rec.bwrap), 'pid 1 and bwrap to end');
    expect(existsSync(sandboxDir(id))).toBe(false);
    expect((await provider.list({ limit: 100, offset: 0 })).map((m) => m.sandbox_id)).not.toContain(id);
  });

  it('a command running when the sandbox is killed reports not_found', async () => {
    const { sandbox_id: id } = await create();
    // Far longer than the test may take: the kill, not its end, must end it.
    const running = provider.exec(id, 'sleep 300', { timeoutS: 60 }).then(
      () => null,
      (e: unknown) => e,
    );
    await waitFor(
      async () =>
        (await provider.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 5 })).stdout.toString().includes('sleep 300'),
      'the command to run',
    );
    await provider.kill(id);
    expect(await running).toMatchObject({ category: 'not_found' });
  });

  it("kill returns only once no process is left in the sandbox's network namespace (one that entered it from outside included)", async () => {
    const { sandbox_id: id } = await create();
    const pid1 = keeperOf(id).pid1.pid;
    // Held until the look below: once free, its number could name another test's new sandbox.
    const held = holdNamespace(pid1, 'net');
    onTestFinished(() => held.release());
    const netNs = held.name;
    expect(netNs).toBe(netNamespace(pid1));
    expect(netNs).not.toBe(netNamespace('self'));
    // A process that joined only the sandbox's network, as an nsenter's host-side half or the
    // keeper's netns helper does: the sandbox's pid namespace dying never reaches it.
    const asRoot = process.getuid?.() === 0;
    const enterer = spawn(
      'nsenter',
      ['-t', String(pid1), ...(asRoot ? [] : ['--preserve-credentials', '-U']), '-n', '--', 'sleep', '300'],
      {
        stdio: 'ignore',
      },
    );
    const exited = new Promise((resolve) => enterer.once('exit', (_code, signal) => resolve(signal)));
    await waitFor(() => processesInNetNamespace(netNs).includes(enterer.pid!), 'the sleep to be in the namespace');
    await provider.kill(id);
    expect(processesInNetNamespace(netNs)).toEqual([]);
    expect(await exited).toBe('SIGKILL');
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
      'the shell to stop',
    );
    await provider.kill(id);
    // Well before the command's own 50 s timeout.
    await waitFor(() => outcome !== 'pending', 'the stopped command to end', 20_000);
    await running;
    expect(outcome).toMatchObject({ category: 'not_found' });
  });

  // A keeper ending its sandbox kills the host-side halves of the resident and of entered commands
  // at once with pid 1 and bwrap, which may be seen exiting a while later (a loaded machine): a
  // call whose command or resident vanished found the sandbox alive and answered with the command's
  // 137 (nsenter) or agent_lost (the resident) instead of not_found (fresh-clone CI, Node 22, the
  // test above, through the resident). The freezer holds pid 1 and bwrap in that moment, SIGKILL
  // pending (the keeper lives on, waiting for bwrap), for as long as the call takes to answer.
  describe.runIf(canFreezeProcesses())('a call that loses its command while pid 1 and bwrap are slow to die (cgroup v1 freezer)', () => {
    it.each([
      ['entered with nsenter', 'kill'],
      ['through the resident', 'kill'],
      ['entered with nsenter', 'its deadline'],
      ['through the resident', 'its deadline'],
    ] as const)('%s, ended by %s: not_found', async (path, ending) => {
      const isResident = path === 'through the resident';
      const p = isResident
        ? provider
        : createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT, residentAgent: false });
      try {
        const { sandbox_id: id } = await p.create({ timeoutS: 60 });
        local.created.push(id);
        const rec = keeperOf(id);
        expect(rec.resident === true).toBe(isResident);
        if (isResident) await waitFor(async () => (await p.agentChannel!(id)) !== null, 'the resident to answer');
        let outcome: unknown = 'pending';
        const running = p.exec(id, 'sleep 300', { timeoutS: 60 }).then(
          (r) => (outcome = r),
          (e: unknown) => (outcome = e),
        );
        await waitFor(
          async () =>
            (await p.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 5 })).stdout.toString().includes('sleep 300'),
          'the command to run',
        );
        const thaw = await freezeProcesses([rec.pid1.pid, rec.bwrap.pid]);
        let killing: Promise<void> | undefined;
        try {
          if (ending === 'kill') killing = p.kill(id);
          else await p.setTimeout(id, 1);
          await waitFor(() => outcome !== 'pending', 'the call to answer', 20_000);
          // Answered in that moment: pid 1 not yet seen exiting, the keeper still there.
          expect(isAlive(rec.pid1) && isAlive(rec.keeper)).toBe(true);
        } finally {
          await thaw();
        }
        await killing;
        await running;
        expect(outcome).toMatchObject({ category: 'not_found' });
        await waitFor(() => !isAlive(rec.keeper) && !isAlive(rec.pid1) && !existsSync(sandboxDir(id)), 'the sandbox to be gone');
      } finally {
        if (p !== provider) await p.close();
      }
    });
  });

  it.runIf(canFreezeProcesses())(
    'kill marks the sandbox as ending before it signals the keeper: a keeper yet to act (or from before the mark) is covered (cgroup v1 freezer)',
    async () => {
      const bare = createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT, residentAgent: false });
      try {
        const { sandbox_id: id } = await bare.create({ timeoutS: 60 });
        local.created.push(id);
        const rec = keeperOf(id);
        // Frozen, the keeper neither acts on the kill's SIGTERM nor marks anything itself.
        const thaw = await freezeProcesses([rec.keeper.pid]);
        let killing: Promise<void> | undefined;
        try {
          killing = bare.kill(id);
          const self = identify(process.pid)!;
          await waitFor(() => {
            const by = readEndingMark(sandboxDir(id));
            return by?.pid === self.pid && by.startTime === self.startTime;
          }, "the kill's mark");
          await expect(bare.exec(id, 'exit 3', { timeoutS: 10 })).rejects.toMatchObject({ category: 'not_found' });
        } finally {
          await thaw();
        }
        await killing;
        expect(isAlive(rec.keeper) || isAlive(rec.pid1)).toBe(false);
        expect(existsSync(sandboxDir(id))).toBe(false);
      } finally {
        await bare.close();
      }
    },
  );

  it.runIf(canFreezeProcesses())(
    'kill resolves only once pid 1 is gone, not when the keeper is: a pid 1 slow to take its SIGKILL (held by a freezer) (cgroup v1 freezer)',
    async () => {
      const bare = createLocalProvider({ stateDir: local.stateDir, keeperScript: KEEPER_SCRIPT, residentAgent: false });
      try {
        const { sandbox_id: id } = await bare.create({ timeoutS: 60 });
        local.created.push(id);
        const rec = keeperOf(id);
        // Frozen, pid 1 stays alive after its SIGKILL until thawed, as a pid 1 not yet scheduled does for a moment.
        const thaw = await freezeProcesses([rec.pid1.pid]);
        let isPid1AliveAtResolve: Promise<boolean>;
        try {
          isPid1AliveAtResolve = bare.kill(id).then(() => isAlive(rec.pid1));
          // The keeper ends (it waits for bwrap, not pid 1) and its directory goes; only then is pid 1 thawed.
          await waitFor(() => !isAlive(rec.keeper) && !existsSync(sandboxDir(id)), 'the keeper to end');
        } finally {
          await thaw();
        }
        expect(await isPid1AliveAtResolve).toBe(false);
      } finally {
        await bare.close();
      }
    },
  );

  it('an ending mark counts while its writer runs: one left by a kill that died leaves the sandbox usable', async () => {
    const { sandbox_id: id } = await create();
    const writer = spawn('sleep', ['300'], { stdio: 'ignore' });
    const by = await waitFor(() => identify(writer.pid!), 'the writer to run');
    // As a server's kill writes it before it signals the keeper.
    writeEndingMark(sandboxDir(id), by);
    // While the kill runs, a command that fails reads as the sandbox ending.
    await expect(provider.exec(id, 'exit 3', { timeoutS: 10 })).rejects.toMatchObject({ category: 'not_found' });
    writer.kill('SIGKILL');
    await waitFor(() => !isAlive(by), 'the writer to die');
    // A kill that died midway: its mark no longer counts.
    expect((await provider.exec(id, 'exit 3', { timeoutS: 10 })).exitCode).toBe(3);
    expect((await provider.exec(id, 'echo on', { timeoutS: 10 })).stdout.toString()).toBe('on\n');
    await provider.kill(id);
    expect(existsSync(sandboxDir(id))).toBe(false);
  });

  it('a state directory that is gone reads as ending (its keeper and pid 1 may be seen alive a moment longer)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ending-'));
    try {
      expect(isMarkedEnding(dir)).toBe(false);
      rmSync(dir, { recursive: true });
      // Before, a call whose resident died in the window after the keeper removed the directory answered agent_lost.
      expect(isMarkedEnding(dir)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('maps failures to fixed categories without host details', async () => {
    const { sandbox_id: id } = await create();
    await expect(provider.readFile(id, 'missing.txt')).rejects.toMatchObject({ category: 'not_found' });
    await expect(provider.readFile(id, '/tmp')).rejects.toMatchObject({ category: 'invalid_argument' });
    // The base view has no host file its user may not read (no /etc/shadow): one of its own.
    await provider.exec(id, 'echo x > unreadable && chmod 000 unreadable', { timeoutS: 10 });
    await expect(provider.readFile(id, 'unreadable')).rejects.toMatchObject({ category: 'permission_denied' });
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
    expect(String((err as Error).message)).not.toContain(local.stateDir);
    expect(JSON.stringify(err)).not.toContain('/home/user/missing.txt');
  });
});
