// What a local sandbox uses, read from the host (the dashboard's figures): files written in a
// writable mount count as disk and, where a memory cgroup holds them (tmpfs pages), as memory;
// a process left running counts as a process; every limit is the one the keeper enforces.
import { describe, expect, it } from 'vitest';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { localSandboxes } from '../support/local-sandboxes.js';

const local = localSandboxes();
const MIB = 1024 * 1024;

describe('local sandbox usage', () => {
  const situation = cgroupSituation();
  it(`${situation.name}: disk, processes and (with a memory cgroup) memory grow with what runs inside, against the enforced limits`, async () => {
    const { provider } = local;
    const id = (await local.create({ timeoutS: 120 })).sandbox_id;
    const enforced = local.keeperOf(id).enforced!;
    const before = await provider.usage!(id);
    await provider.exec(id, 'head -c 8388608 /dev/zero > /tmp/eight-mib; sleep 600 >/dev/null 2>&1 &', { timeoutS: 30 });
    const after = await provider.usage!(id);

    expect(after.diskBytes!.used - before.diskBytes!.used).toBeGreaterThanOrEqual(8 * MIB);
    expect(after.diskBytes!.limit).toBe(enforced.diskMb === null ? null : enforced.diskMb * MIB);
    expect(after.processes!.used).toBeGreaterThan(before.processes!.used);
    expect(after.processes!.limit).toBeGreaterThan(0);
    if (enforced.memoryMb !== null) {
      // tmpfs pages are charged to the sandbox's memory cgroup.
      expect(after.memoryBytes!.used - before.memoryBytes!.used).toBeGreaterThanOrEqual(8 * MIB);
      expect(after.memoryBytes!.limit).toBe(enforced.memoryMb * MIB);
    } else {
      expect(after.memoryBytes).toBeNull();
    }
    await provider.kill(id);
    await expect(provider.usage!(id)).rejects.toMatchObject({ category: 'not_found' });
  });
});
