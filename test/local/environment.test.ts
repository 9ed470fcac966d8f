// What the local provider says when the machine cannot run sandboxes, and how it treats state
// it cannot trust (pid reuse), plus the keeper honouring a shortened deadline.
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { identify, isAlive } from '../../host/providers/local/system/proc.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { canCatch } from '../support/processes.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

describe('local provider environment checks', () => {
  const stateDir = tempStateDir();
  // Fake tools must be reachable by the unprivileged uid the keeper drops to as root.
  const fakes = mkdtempSync(join(tmpdir(), 'fake-bwrap-'));
  chmodSync(fakes, 0o755);
  const fakeBwrap = (name: string, stderr: string): string => {
    const path = join(fakes, name);
    writeFileSync(path, `#!/bin/sh\necho '${stderr}' >&2\nexit 1\n`, { mode: 0o755 });
    return path;
  };

  beforeAll(() => requireSandboxes());
  afterAll(async () => {
    rmSync(fakes, { recursive: true, force: true });
    await destroyStateDir(stateDir);
  });

  it('with SANDBOX_MCP_BWRAP naming no executable, create names the setting and how to fix it', async () => {
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, tools: { bwrap: join(fakes, 'missing-bwrap') } });
    const err = await p.create({}).catch((e: unknown) => e);
    expect(err).toMatchObject({ category: 'unavailable', code: 'bwrap_missing' });
    expect((err as Error).message).toMatch(/^SANDBOX_MCP_BWRAP does not name an executable file: .*install/);
  });

  it('without perl (which runs the helpers every sandbox needs), create is unavailable, naming perl and how to install it', async () => {
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, tools: { perl: join(fakes, 'missing-perl') } });
    const err = await p.create({}).catch((e: unknown) => e);
    expect(err).toMatchObject({ category: 'unavailable', code: 'perl_missing' });
    expect((err as Error).message).toMatch(/^perl is not installed: .*apt-get install perl-base/);
    const local = join(stateDir, 'local');
    expect(existsSync(local) ? readdirSync(local).filter((n) => !n.startsWith('.')) : []).toEqual([]);
  });

  it('refused user namespaces: says which restriction and how to lift it', async () => {
    const cases = [
      { stderr: 'bwrap: setting up uid map: Permission denied', code: 'userns_apparmor', text: /AppArmor/ },
      {
        stderr: 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces',
        code: 'userns_refused',
        text: /enable them/,
      },
      { stderr: 'bwrap: Creating new namespace failed: No space left on device', code: 'userns_refused', text: /user namespaces/ },
    ];
    for (const c of cases) {
      const p = createLocalProvider({
        stateDir: stateDir,
        keeperScript: KEEPER_SCRIPT,
        tools: { bwrap: fakeBwrap(c.code + Math.random(), c.stderr) },
      });
      const err = await p.create({}).catch((e: unknown) => e);
      expect(err).toMatchObject({ category: 'unavailable', code: c.code });
      expect((err as Error).message).toMatch(c.text);
      expect((err as Error).message).not.toContain('bwrap:');
    }
    // Failed creates leave nothing behind.
    const local = join(stateDir, 'local');
    expect(existsSync(local) ? readdirSync(local).filter((n) => !n.startsWith('.')) : []).toEqual([]);
  });

  it('a bubblewrap without --size (before 0.7) starts the sandbox unsized, reports no disk size, and the other limits hold', async () => {
    const real = execFileSync('sh', ['-c', 'command -v bwrap'], { encoding: 'utf8' }).trim();
    const old = join(fakes, 'old-bwrap');
    writeFileSync(
      old,
      `#!/bin/sh\nfor a in "$@"; do [ "$a" = --size ] && { echo 'bwrap: Unknown option --size' >&2; exit 1; }; done\nexec '${real}' "$@"\n`,
      { mode: 0o755 },
    );
    const p = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT, tools: { bwrap: old } });
    const meta = await p.create({ timeoutS: 60 });
    try {
      expect(meta.disk_size_mb).toBeNull();
      const r = await p.exec(meta.sandbox_id, 'grep "^Max open files" /proc/self/limits; touch /home/x', { timeoutS: 10 });
      expect(r.stdout.toString()).toMatch(/^Max open files +4096 +4096 /);
      expect(r.stderr.toString()).toMatch(/Read-only file system/);
    } finally {
      await p.kill(meta.sandbox_id);
    }
  });

  it('refuses a state directory others may write or that belongs to another user (it decides what runs and what is signalled)', async () => {
    const open = mkdtempSync(join(tmpdir(), 'open-state-'));
    try {
      chmodSync(open, 0o777);
      const p = createLocalProvider({ stateDir: open, keeperScript: KEEPER_SCRIPT });
      await expect(p.create({})).rejects.toMatchObject({ category: 'permission_denied', code: 'state_dir_not_private' });
      await expect(p.list({ limit: 10, offset: 0 })).rejects.toMatchObject({ category: 'permission_denied' });
      await expect(p.getInfo('abcdefghijkl')).rejects.toMatchObject({ category: 'permission_denied' });
      expect(readdirSync(join(open, 'local'))).toEqual([]);
      if (process.getuid?.() === 0) {
        chmodSync(open, 0o700);
        chownSync(open, 65534, 65534);
        await expect(p.list({ limit: 10, offset: 0 })).rejects.toMatchObject({ category: 'permission_denied' });
      }
    } finally {
      rmSync(open, { recursive: true, force: true });
    }
  });

  it('never trusts a recorded pid whose start time differs (pid reuse): cleans up, signals nothing', async () => {
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    const me = identify(process.pid)!;
    const dir = join(stateDir, 'local', 'reusedpid000');
    mkdirSync(dir, { recursive: true });
    const stale = { pid: process.pid, startTime: String(Number(me.startTime) + 1) };
    writeFileSync(
      join(dir, 'spec.json'),
      JSON.stringify({
        version: 1,
        id: 'reusedpid000',
        createdAtMs: Date.now(),
        envs: {},
        cpu: null,
        memoryMb: null,
        identity: { uid: 65534, gid: 65534, dropPrivileges: true },
        tools: { bwrap: 'bwrap', nsenter: 'nsenter', setpriv: 'setpriv', sh: '/bin/sh' },
        shell: '/bin/sh',
        hidePaths: [],
        roBindPaths: [],
        hideVarRun: false,
      }),
    );
    writeFileSync(join(dir, 'keeper.json'), JSON.stringify({ version: 1, keeper: stale, bwrap: stale, pid1: stale, cgroups: [] }));
    writeFileSync(join(dir, 'deadline'), String(Date.now() + 60_000));
    expect((await p.list({ limit: 100, offset: 0 })).map((m) => m.sandbox_id)).not.toContain('reusedpid000');
    await expect(p.getInfo('reusedpid000')).rejects.toMatchObject({ category: 'not_found' });
    expect(existsSync(dir)).toBe(false);
    expect(isAlive(me)).toBe(true);
  });

  it("a keeper catches SIGUSR1, set_sandbox_timeout's wake-up (no thread of it blocks the signal)", async () => {
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    const { sandbox_id: id } = await p.create({ timeoutS: 600 });
    const rec = readKeeperRecord(join(stateDir, 'local', id))!;
    try {
      // Blocked, it would stay pending: a shortened deadline would wait for the keeper's recheck timer.
      // Polled: while the keeper spawns (the resident, its nsenter) libuv blocks every signal around
      // the fork for a moment; blocked for good (Node's --disable-sigusr1) it never turns deliverable.
      await waitFor(() => canCatch(rec.keeper.pid, constants.signals.SIGUSR1), 'SIGUSR1 deliverable to the keeper');
      expect(isAlive(rec.keeper)).toBe(true);
    } finally {
      await p.kill(id);
    }
  });

  it('the keeper acts on a shortened deadline (set_sandbox_timeout), even with a stopped command', async () => {
    const p = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    const { sandbox_id: id } = await p.create({ timeoutS: 600 });
    const rec = readKeeperRecord(join(stateDir, 'local', id))!;
    // A stopped shell stops its nsenter too, which then cannot reap it: the keeper must handle that.
    let outcome: unknown = 'pending';
    const stopped = p.exec(id, 'kill -STOP $$', { timeoutS: 50 }).then(
      () => (outcome = 'resolved'),
      (e: unknown) => (outcome = e),
    );
    await waitFor(
      async () => (await p.exec(id, 'grep -l "^State:.*T (stopped)" /proc/[0-9]*/status', { timeoutS: 5 })).stdout.length > 0,
      'the shell to stop',
    );
    await p.setTimeout(id, 1);
    await waitFor(() => !isAlive(rec.keeper) && !isAlive(rec.pid1) && !isAlive(rec.bwrap), 'the sandbox to end at its new deadline');
    expect(existsSync(join(stateDir, 'local', id))).toBe(false);
    await expect(p.getInfo(id)).rejects.toMatchObject({ category: 'not_found' });
    // Well before the command's own 50 s timeout.
    await waitFor(() => outcome !== 'pending', 'the stopped command to end');
    await stopped;
    expect(outcome).toMatchObject({ category: 'not_found' });
  });
});
