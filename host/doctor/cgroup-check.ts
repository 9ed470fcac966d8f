// Which cgroup version this machine has, which controllers limits could use, and whether the cpu
// and memory limits of create_sandbox really work here (a probe cgroup made and removed the way
// the keeper makes a sandbox's).
import { createCgroups, describeCgroups, removeCgroups } from '../providers/local/system/cgroups.js';
import { ok, warn, type Check } from './check.js';

/** cgroup version and controllers; cpu/memory limits tried for real. Never a failure: sandboxes work without limits. */
export async function checkCgroups(): Promise<Check> {
  const { version, controllers } = describeCgroups();
  const seen = `cgroup ${version}, controllers offered: ${controllers.length > 0 ? controllers.join(', ') : 'none'}`;
  let dirs: string[];
  try {
    dirs = createCgroups(`sandbox-mcp-doctor-${process.pid}`, { cpu: 1, memoryMb: 64 });
  } catch {
    return warn(
      'cgroups',
      `${seen}; cpu and memory limits cannot be set here (create_sandbox with cpu or memory fails as unsupported; without them it works)`,
      'run the server as root on cgroup v1, or give it a cgroup v2 subtree with cpu and memory delegated (systemd: Delegate=yes)',
    );
  }
  await removeCgroups(dirs);
  return ok('cgroups', `${seen}; cpu and memory limits work`);
}
