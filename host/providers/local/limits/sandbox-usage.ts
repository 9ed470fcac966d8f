// What a live local sandbox uses against the limits its keeper enforces, for people (the
// dashboard): memory from its memory cgroup, processes and threads from its pids cgroup (or its
// /proc), disk from its writable mounts. Whatever cannot be read is null, never 0.
import type { SandboxUsage, UsageAmount } from '../../provider.js';
import type { LiveSandbox } from '../sandbox/registry.js';
import { diskBytes, memoryBytes, taskCount } from './usage.js';

const MIB = 1024 * 1024;

function amount(used: number | null, limit: number | null): UsageAmount | null {
  return used === null ? null : { used, limit };
}

/** The usage of `sb` now. */
export function sandboxUsage(sb: LiveSandbox): SandboxUsage {
  const enforced = sb.keeper.enforced;
  const pid1 = sb.keeper.pid1.pid;
  return {
    memoryBytes: amount(memoryBytes(sb.keeper.cgroups), enforced?.memoryMb != null ? enforced.memoryMb * MIB : null),
    processes: amount(taskCount(sb.keeper.cgroups, pid1), sb.spec.limits?.processes ?? null),
    diskBytes: amount(
      diskBytes(pid1, sb.spec.root !== undefined, sb.spec.workspace !== undefined),
      enforced?.diskMb != null ? enforced.diskMb * MIB : null,
    ),
  };
}
