// cpu and memory limits of local sandboxes against real bubblewrap and cgroups, in whatever
// situation this machine is (see test/support/cgroup-situation.ts).
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import type { Provider } from '../../host/providers/provider.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { localSandboxes } from '../support/local-sandboxes.js';
import { waitFor } from '../support/wait.js';

const MIB = 1024 * 1024;
const local = localSandboxes();
const { create, keeperOf } = local;
let provider: Provider;
beforeAll(() => {
  provider = local.provider;
});

describe('local sandbox cpu and memory limits', () => {
  // One test, named after the situation it checks: limits enforced wherever a cgroup with cpu and
  // memory can be made (v1 or v2), refused as unsupported elsewhere. Never a skip.
  const situation = cgroupSituation();
  if (situation.canLimit) {
    it(`${situation.name}: cpu and memory are enforced by a cgroup the commands run in, removed with the sandbox`, async () => {
      const meta = await create({ cpu: 1, memoryMb: 96 });
      expect(meta).toMatchObject({ cpu_count: 1, memory_mb: 96 });
      const id = meta.sandbox_id;
      const rec = keeperOf(id);
      expect(rec.cgroups.length).toBeGreaterThan(0);
      // The limits are written where the kernel reads them (v1 knobs, or v2's).
      const knob = (...names: string[]) => {
        for (const dir of rec.cgroups)
          for (const name of names) if (existsSync(join(dir, name))) return readFileSync(join(dir, name), 'utf8').trim();
        throw new Error(`none of ${names.join(', ')} in the sandbox's cgroups`);
      };
      if (rec.cgroups.some((dir) => existsSync(join(dir, 'cpu.max')))) {
        expect(knob('cpu.max')).toBe('100000 100000');
        expect(knob('memory.max')).toBe(String(96 * 1024 * 1024));
      } else {
        expect([knob('cpu.cfs_quota_us'), knob('cpu.cfs_period_us')]).toEqual(['100000', '100000']);
        expect(knob('memory.limit_in_bytes')).toBe(String(96 * 1024 * 1024));
      }
      // Commands run inside: what an exec leaves running is a member of every one of the cgroups.
      await provider.exec(id, 'sleep 4242 >/dev/null 2>&1 &', { timeoutS: 10 });
      const isSleeper = (pid: string) => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'latin1') === 'sleep\x004242\x00';
        } catch {
          return false;
        }
      };
      for (const dir of rec.cgroups) {
        await waitFor(() => readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').some(isSleeper), 'the sleeper in the cgroup');
      }
      // A memory hog of twice the limit (bounded: Buffer memory is outside V8's heap limit) is
      // OOM-killed before it is done; the sandbox lives on.
      const hog = await provider.exec(
        id,
        `node -e "const a = []; for (let i = 0; i < ${2 * 96}; i++) a.push(Buffer.alloc(1 << 20, 1)); console.log('not killed')"`,
        { timeoutS: 60 },
      );
      expect(hog.exitCode).toBe(137);
      expect(hog.stdout.toString()).toBe('');
      expect((await provider.exec(id, 'echo ok', { timeoutS: 10 })).stdout.toString()).toBe('ok\n');
      await provider.kill(id);
      for (const dir of rec.cgroups) expect(existsSync(dir)).toBe(false);
      expect(readFileSync('/proc/self/cgroup', 'utf8')).not.toContain(id);
    });

    it(`${situation.name}: all sandboxes of a state directory together stay under the memory ceiling (--max-total-memory), held by their parent cgroup`, async () => {
      const stateDir = tempStateDir();
      const ceiled = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT, limits: { maxTotalMemoryMb: 160, memoryMb: 128 } });
      try {
        const [a, b] = [(await ceiled.create({})).sandbox_id, (await ceiled.create({})).sandbox_id];
        const records = [a, b].map((id) => readKeeperRecord(join(stateDir, 'local', id))!);
        const memoryDirs = records.map((r) => r.cgroups.find((d) => existsSync(join(d, 'memory.limit_in_bytes')))!);
        // Both sandboxes' memory cgroups are below one parent, whose limit is the ceiling.
        const parent = dirname(memoryDirs[0]!);
        expect(basename(parent)).toMatch(/^sandbox-mcp-all-[0-9a-f]{12}$/);
        expect(dirname(memoryDirs[1]!)).toBe(parent);
        expect(readFileSync(join(parent, 'memory.limit_in_bytes'), 'utf8').trim()).toBe(String(160 * MIB));
        for (const r of records) expect(r.enforced).toMatchObject({ memoryMb: 128, totalMemoryMb: 160 });

        // Each takes 96 MB (within its own 128 MB), together 192 MB: above the ceiling, so one is killed.
        const take = (then: string) => `python3 -c "import os, time; b = b'x' * (96 << 20); print('took', flush=True); ${then}"`;
        const first = ceiled.exec(a, take("[time.sleep(0.05) for _ in iter(lambda: os.path.exists('/tmp/go'), True)]"), { timeoutS: 60 });
        const usage = () => Number(readFileSync(join(memoryDirs[0]!, 'memory.usage_in_bytes'), 'utf8'));
        await waitFor(() => usage() > 96 * MIB, "the first sandbox's 96 MB");
        const second = await ceiled.exec(b, take("print('done')"), { timeoutS: 60 });
        await ceiled.writeFile(a, '/tmp/go', Buffer.alloc(0));
        const codes = [(await first).exitCode, second.exitCode].sort();
        expect(codes).toEqual([0, 137]);
        await ceiled.kill(a);
        await ceiled.kill(b);
        // The last sandbox to go takes the parent with it.
        expect(existsSync(parent)).toBe(false);
      } finally {
        await ceiled.close();
        await destroyStateDir(stateDir);
      }
    });
  } else {
    it(`${situation.name}: no cgroup can be made, so cpu or memory is refused as unsupported, saying why`, async () => {
      for (const limits of [{ cpu: 1 }, { memoryMb: 96 }, { cpu: 1, memoryMb: 96 }]) {
        const refused = await create(limits).then(
          () => null,
          (e: unknown) => e,
        );
        expect(refused, JSON.stringify(limits)).toMatchObject({ category: 'unsupported' });
        expect((refused as Error).message).toMatch(/cgroup/);
      }
      // Nothing was left half-made: every sandbox listed is one this file created.
      for (const listed of await provider.list({ limit: 100, offset: 0 })) expect(local.created).toContain(listed.sandbox_id);
    });
  }
});
