// The start-up sweep of dead sandboxes: a keeper killed -9 leaves its state directory and cgroups
// behind; a new provider instance removes them without being asked, and so does a built server
// that merely starts (whatever its default provider, even where bubblewrap is missing), while live
// sandboxes and creates still in progress in another instance are left alone.
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { readKeeperRecord, readSpec } from '../../host/providers/local/sandbox/state-dir.js';
import { identify, isAlive } from '../../host/providers/local/system/proc.js';
import type { Provider } from '../../host/providers/provider.js';
import { connectStdio } from '../support/built-server.js';
import { fakeBwraps, readDrop } from '../support/fake-bwrap.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireBuild, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

describe('start-up sweep of dead sandboxes', () => {
  beforeAll(() => {
    requireSandboxes();
    requireBuild();
  });
  const stateDir = tempStateDir();
  const fakes = fakeBwraps();
  const sandboxDir = (id: string) => join(stateDir, 'local', id);
  const limits = cgroupSituation().canLimit ? { cpu: 1, memoryMb: 64 } : {};
  const providers: Provider[] = [];
  const provider = (opts: Parameters<typeof createLocalProvider>[0] = {}): Provider => {
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, ...opts });
    providers.push(p);
    return p;
  };

  afterAll(async () => {
    for (const p of providers) {
      for (const m of await p.list({ limit: 100, offset: 0 }).catch(() => [])) await p.kill(m.sandbox_id).catch(() => {});
      await p.close();
    }
    fakes.remove();
    await destroyStateDir(stateDir);
  });

  it('a keeper killed -9 leaves state and cgroups until a new instance sweeps them; live sandboxes stay', async () => {
    const first = provider();
    const { sandbox_id: deadId } = await first.create({ timeoutS: 120, ...limits });
    const { sandbox_id: liveId } = await first.create({ timeoutS: 120 });
    const rec = readKeeperRecord(sandboxDir(deadId))!;
    expect(rec.cgroups.length > 0).toBe(cgroupSituation().canLimit);

    process.kill(rec.keeper.pid, 'SIGKILL');
    await waitFor(() => !isAlive(rec.keeper) && !isAlive(rec.pid1) && !isAlive(rec.bwrap), 'the killed sandbox to end');
    // The sandbox died with its keeper; what it left stays while no server looks.
    expect(existsSync(sandboxDir(deadId))).toBe(true);
    for (const dir of rec.cgroups) expect(existsSync(dir)).toBe(true);

    // A new server's provider sweeps on its own: no call names either id.
    const second = provider();
    await waitFor(() => !existsSync(sandboxDir(deadId)) && rec.cgroups.every((d) => !existsSync(d)), 'the sweep to remove it');
    await second.close();
    expect(existsSync(sandboxDir(liveId))).toBe(true);
    expect((await second.exec(liveId, 'echo alive', { timeoutS: 10 })).stdout.toString()).toBe('alive\n');
  });

  // The server variants: the default; e2b as the default provider (no tool call ever builds the
  // local provider); bubblewrap missing (the server starts with its warning and sweeps anyway).
  const serverVariants: [string, Record<string, string>, string[]][] = [
    ['local default', {}, []],
    ['e2b default', {}, ['--provider', 'e2b']],
    ['bubblewrap missing', { SANDBOX_MCP_BWRAP: '/nonexistent/bwrap' }, []],
  ];
  for (const [variant, env, args] of serverVariants) {
    it(`a server that merely starts and answers initialize sweeps a sandbox whose keeper was killed -9 (${variant})`, async () => {
      const first = provider();
      const { sandbox_id: deadId } = await first.create({ timeoutS: 120, ...limits });
      const rec = readKeeperRecord(sandboxDir(deadId))!;
      process.kill(rec.keeper.pid, 'SIGKILL');
      await waitFor(() => !isAlive(rec.keeper) && !isAlive(rec.pid1) && !isAlive(rec.bwrap), 'the killed sandbox to end');
      expect(existsSync(sandboxDir(deadId))).toBe(true);

      // connectStdio returns once the server answered initialize; no tool is ever called.
      const server = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir, ...env }, args);
      try {
        const sweptLine = () =>
          server
            .stderr()
            .split('\n')
            .find((l) => l.includes('"msg":"start-up sweep done"'));
        await waitFor(() => sweptLine() !== undefined, 'the server to log its start-up sweep');
        expect(existsSync(sandboxDir(deadId))).toBe(false);
        for (const dir of rec.cgroups) expect(existsSync(dir)).toBe(false);
        expect((JSON.parse(sweptLine()!) as { removed: number }).removed).toBeGreaterThanOrEqual(1);
        if (env.SANDBOX_MCP_BWRAP)
          expect(server.stderr()).toContain(
            'sandbox-mcp: warning: the local provider cannot work here: SANDBOX_MCP_BWRAP does not name an executable file',
          );
      } finally {
        await server.close();
      }
    });
  }

  it('never sweeps a create still in progress in another instance, however long it takes', async () => {
    const bwrap = fakes.gated('slow-start');
    const creating = provider({ tools: { bwrap: bwrap.path } }).create({ timeoutS: 120, ...limits });
    creating.catch(() => undefined); // awaited below; no unhandled rejection if a check fails first
    // The keeper is running and held at bwrap: the directory exists, without a keeper record.
    await waitFor(() => readDrop(bwrap.drop) !== null, 'the fake bwrap to start');
    const [id] = readdirSync(join(stateDir, 'local')).filter((n) => !n.startsWith('.') && readKeeperRecord(sandboxDir(n)) === null);
    expect(id).toBeDefined();
    expect(readSpec(sandboxDir(id!))).not.toBeNull();

    // To this instance any create is overdue after 3 ms: only the create-in-progress mark keeps it away.
    const sweeper = provider({ startTimeoutMs: 1 });
    await new Promise((r) => setTimeout(r, 200));
    await sweeper.close(); // waits for its start-up sweep
    expect((await sweeper.list({ limit: 100, offset: 0 })).map((m) => m.sandbox_id)).not.toContain(id);
    await expect(sweeper.getInfo(id!)).rejects.toMatchObject({ category: 'not_found' });
    expect(existsSync(sandboxDir(id!))).toBe(true);

    bwrap.open();
    const meta = await creating;
    expect(meta.sandbox_id).toBe(id);
    expect((await sweeper.exec(id!, 'echo started', { timeoutS: 10 })).stdout.toString()).toBe('started\n');
  });

  it('a keeper killed -9 while starting: the create fails and the cgroups it made are removed too', async () => {
    const bwrap = fakes.gated('killed-while-starting');
    const before = new Set(existsSync(join(stateDir, 'local')) ? readdirSync(join(stateDir, 'local')) : []);
    const creating = provider({ tools: { bwrap: bwrap.path } }).create({ timeoutS: 120, ...limits });
    creating.catch(() => undefined); // awaited below; no unhandled rejection if a check fails first
    await waitFor(() => readDrop(bwrap.drop) !== null, 'the fake bwrap to start');
    const { pid, keeperPid, cgroupDirs } = readDrop(bwrap.drop)!;
    expect(cgroupDirs.length > 0).toBe(cgroupSituation().canLimit);
    const [id] = readdirSync(join(stateDir, 'local')).filter((n) => !before.has(n) && !n.startsWith('.'));
    // No keeper record yet: only the keeper's early list names the cgroups.
    expect(readKeeperRecord(sandboxDir(id!))).toBeNull();
    process.kill(keeperPid, 'SIGKILL');
    // The real bwrap would die with its parent; the stand-in is told to.
    process.kill(pid, 'SIGKILL');
    await expect(creating).rejects.toMatchObject({ category: 'internal', code: 'keeper_failed' });
    for (const dir of cgroupDirs) expect(existsSync(dir)).toBe(false);
    expect(existsSync(sandboxDir(id!))).toBe(false);
  });

  it('sweeps a create whose server died before its keeper recorded the sandbox (nobody can finish it)', async () => {
    const me = identify(process.pid)!;
    const dir = sandboxDir('orphancreate');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // The creator was this pid in an earlier life: a start time that differs is another process.
    writeFileSync(join(dir, 'creator.json'), JSON.stringify({ pid: me.pid, startTime: String(Number(me.startTime) + 1) }));
    writeFileSync(join(dir, 'spec.json'), JSON.stringify({ version: 1, id: 'orphancreate' }));
    // Young, and the default start timeout is long: only the dead creator tells it apart.
    provider();
    await waitFor(() => !existsSync(dir), 'the directory to be swept');
    expect(isAlive(me)).toBe(true);
  });
});
