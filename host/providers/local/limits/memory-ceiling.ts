// The memory ceiling of all sandboxes of a state directory (--max-total-memory). Where a parent
// cgroup can be made, the kernel holds it (system/cgroups.ts: each sandbox's memory cgroup is
// made below the state directory's parent). Where sandboxes get a memory cgroup but no parent
// above it, their limits are counted instead: a create whose limit would take the sum above the
// ceiling is refused. Where no memory cgroup can be made at all, nothing bounds memory (the
// server warns at start-up and the doctor says so).
import { join } from 'node:path';
import { listSandboxIds, readKeeperRecord } from '../sandbox/state-dir.js';

/** The memory limits (MiB) of the sandboxes whose memory cgroup has no ceiling above it; `isCounting` when there is one. */
export interface UnceiledMemory {
  isCounting: boolean;
  limitsMb: number[];
}

/** Reads the sandboxes' keeper records: which of them hold a memory limit the ceiling does not. */
export function unceiledMemory(sandboxes: string): UnceiledMemory {
  const limitsMb: number[] = [];
  for (const id of listSandboxIds(sandboxes)) {
    const enforced = readKeeperRecord(join(sandboxes, id))?.enforced;
    // Records from before the ceiling have no totalMemoryMb: they are not counted.
    if (enforced?.memoryMb != null && enforced.totalMemoryMb === null) limitsMb.push(enforced.memoryMb);
  }
  return { isCounting: limitsMb.length > 0, limitsMb };
}

/** True when a new sandbox limited to `memoryMb` would take the counted limits above `ceilingMb`. */
export function exceedsCeiling(unceiled: UnceiledMemory, memoryMb: number, ceilingMb: number): boolean {
  return unceiled.isCounting && unceiled.limitsMb.reduce((a, b) => a + b, 0) + memoryMb > ceilingMb;
}
