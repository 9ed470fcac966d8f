// The keeper gives back what it made — its cgroups, the state directory — on every way it ends
// that it survives: SIGTERM (before and after ready), the deadline, pid 1 dying, bwrap failing
// to start, and a fault of its own. No provider call follows the ending in these tests, so what
// is cleaned up was cleaned up by the keeper. (SIGKILL of the keeper is the sweep's: sweep.test.ts.)
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { readKeeperRecord, type KeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { isAlive, readStartTime } from '../../host/providers/local/system/proc.js';
import type { Provider } from '../../host/providers/provider.js';
import { fakeBwraps, readDrop } from '../support/fake-bwrap.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

describe('keeper exit paths', () => {
  beforeAll(() => requireSandboxes());
  const stateDir = tempStateDir();
  const fakes = fakeBwraps();
  const hasCgroups = cgroupSituation().canLimit;
  const limits = hasCgroups ? { cpu: 1, memoryMb: 64 } : {};
  const provider: Provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
  const sandboxDir = (id: string) => join(stateDir, 'local', id);
  const isGone = (rec: KeeperRecord, id: string): boolean =>
    !isAlive(rec.keeper) &&
    !isAlive(rec.pid1) &&
    !isAlive(rec.bwrap) &&
    !existsSync(sandboxDir(id)) &&
    rec.cgroups.every((d) => !existsSync(d));

  /** A ready sandbox with cgroups (where this machine allows them) and its keeper's record. */
  const createSandbox = async (): Promise<{ id: string; rec: KeeperRecord }> => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 120, ...limits });
    const rec = readKeeperRecord(sandboxDir(id))!;
    expect(rec.cgroups.length > 0).toBe(hasCgroups);
    for (const dir of rec.cgroups) expect(existsSync(dir)).toBe(true);
    return { id, rec };
  };

  afterAll(async () => {
    for (const m of await provider.list({ limit: 100, offset: 0 }).catch(() => [])) await provider.kill(m.sandbox_id).catch(() => {});
    await provider.close();
    fakes.remove();
    await destroyStateDir(stateDir);
  });

  it('SIGTERM: the keeper ends the sandbox and removes its cgroups and state', async () => {
    const { id, rec } = await createSandbox();
    process.kill(rec.keeper.pid, 'SIGTERM');
    await waitFor(() => isGone(rec, id), 'the sandbox to be gone');
  });

  it('the deadline: the same, with no server involved', async () => {
    // Created with room to read its record, then given a 1 s deadline: a 1 s create could pass its
    // deadline (counted from before the keeper started) while a loaded machine was still starting it.
    const { id, rec } = await createSandbox();
    await provider.setTimeout(id, 1);
    await waitFor(() => isGone(rec, id), 'the sandbox to be gone');
  });

  it('pid 1 killed from the host: the same', async () => {
    const { id, rec } = await createSandbox();
    process.kill(rec.pid1.pid, 'SIGKILL');
    await waitFor(() => isGone(rec, id), 'the sandbox to be gone');
  });

  it('bwrap failing to start: the cgroups it was started in are gone when create reports the failure', async () => {
    const bwrap = fakes.failing('broken');
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, tools: { bwrap: bwrap.path } });
    await expect(p.create({ timeoutS: 60, ...limits })).rejects.toMatchObject({ category: 'unavailable', code: 'bwrap_failed' });
    const drop = readDrop(bwrap.drop)!;
    expect(drop.cgroupDirs.length > 0).toBe(hasCgroups);
    for (const dir of drop.cgroupDirs) expect(existsSync(dir)).toBe(false);
    await p.close();
  });

  it('SIGTERM before the sandbox is ready: a start failure, with nothing left behind', async () => {
    const bwrap = fakes.gated('held-for-sigterm');
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, tools: { bwrap: bwrap.path } });
    const creating = p.create({ timeoutS: 60, ...limits });
    creating.catch(() => undefined); // awaited below; no unhandled rejection if a check fails first
    await waitFor(() => readDrop(bwrap.drop) !== null, 'the fake bwrap to start');
    const { keeperPid, cgroupDirs } = readDrop(bwrap.drop)!;
    expect(cgroupDirs.length > 0).toBe(hasCgroups);
    process.kill(keeperPid, 'SIGTERM');
    await expect(creating).rejects.toMatchObject({ category: 'internal', code: 'keeper_failed' });
    for (const dir of cgroupDirs) expect(existsSync(dir)).toBe(false);
    await waitFor(() => readStartTime(keeperPid) === null, 'the keeper to exit');
    await p.close();
  });

  it('a fault of its own (its state directory vanished while starting): the same', async () => {
    const bwrap = fakes.gated('held-for-fault');
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, tools: { bwrap: bwrap.path } });
    const before = new Set(existsSync(join(stateDir, 'local')) ? readdirSync(join(stateDir, 'local')) : []);
    const creating = p.create({ timeoutS: 60, ...limits });
    creating.catch(() => undefined); // awaited below; no unhandled rejection if a check fails first
    await waitFor(() => readDrop(bwrap.drop) !== null, 'the fake bwrap to start');
    const { keeperPid, cgroupDirs } = readDrop(bwrap.drop)!;
    const [id] = readdirSync(join(stateDir, 'local')).filter((n) => !before.has(n) && !n.startsWith('.'));
    // Writing keeper.json now fails: the keeper must end the sandbox it has just started.
    rmSync(sandboxDir(id!), { recursive: true, force: true });
    bwrap.open();
    await expect(creating).rejects.toMatchObject({ category: 'internal', code: 'keeper_failed' });
    for (const dir of cgroupDirs) expect(existsSync(dir)).toBe(false);
    await waitFor(() => readStartTime(keeperPid) === null, 'the keeper to exit');
    await p.close();
  });
});
