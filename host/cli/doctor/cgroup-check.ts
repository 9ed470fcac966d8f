// Which cgroup version this machine has, which controllers limits could use, and which limits a
// cgroup really enforces here (a probe cgroup made and removed the way the keeper makes a sandbox's).
import {
  createCgroups,
  describeCgroups,
  removeCgroups,
  removeEmptyCeilings,
  type CgroupLimits,
  type SandboxCgroups,
} from '../../providers/local/system/cgroups.js';
import { ok, warn, type Check } from './check.js';

/** The check, and the limits a sandbox's cgroup enforces here (for the limits report). */
export interface CgroupProbe {
  check: Check;
  enforced: CgroupLimits;
  /** The probe's memory cgroup was made below a parent holding a memory limit, as a sandbox's is below the ceiling. */
  hasCeiling: boolean;
}

/** cgroup version and controllers; cpu, memory and pids limits tried for real. Never a failure: sandboxes work without cgroups. */
export async function checkCgroups(): Promise<CgroupProbe> {
  const { version, controllers } = describeCgroups();
  const seen = `cgroup ${version}, controllers offered: ${controllers.length > 0 ? controllers.join(', ') : 'none'}`;
  let made: SandboxCgroups;
  try {
    // Below a parent of its own, as a sandbox's is below its state directory's ceiling.
    made = createCgroups(
      `sandbox-mcp-doctor-${process.pid}`,
      { cpu: 1, memoryMb: 64, pidsMax: 64 },
      { cpu: false, memory: false },
      undefined,
      {
        name: `sandbox-mcp-all-doctor-${process.pid}`,
        memoryMb: 128,
      },
    );
  } catch {
    made = { dirs: [], version: null, enforced: {} };
  }
  await removeCgroups(made.dirs);
  removeEmptyCeilings(made.dirs);
  const { enforced } = made;
  const hasCeiling = made.ceilingMemoryMb != null;
  const works = [
    enforced.cpu !== undefined && 'cpu',
    enforced.memoryMb !== undefined && 'memory',
    enforced.pidsMax !== undefined && 'pids',
  ].filter((c): c is string => c !== false);
  if (enforced.cpu !== undefined && enforced.memoryMb !== undefined && enforced.pidsMax !== undefined) {
    return { check: ok('cgroups', `${seen}; cpu, memory and pids limits work`), enforced, hasCeiling };
  }
  return {
    check: warn(
      'cgroups',
      `${seen}; ${works.length > 0 ? `only ${works.join(' and ')} limits work` : 'no cgroup can be made'}: ` +
        'sandboxes get no memory limit (memory_mb null) and create_sandbox with cpu or memory fails as unsupported; rlimits still bound processes',
      'run the server as root on cgroup v1, or give it a cgroup v2 subtree with cpu, memory and pids delegated (systemd: Delegate=yes)',
    ),
    enforced,
    hasCeiling,
  };
}
