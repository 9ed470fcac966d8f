// What get_sandbox and list_sandboxes show of a local sandbox: its spec and deadline in the
// provider-neutral shape every provider returns.
import type { SandboxMetadata } from '../../provider.js';
import { specTemplate, type SandboxSpec } from '../sandbox/spec.js';
import type { KeeperRecord } from '../sandbox/state-dir.js';

/**
 * The provider-neutral metadata of a running local sandbox: cpu_count, memory_mb and
 * disk_size_mb are what its keeper enforces (null where nothing does).
 */
export function sandboxMetadata(spec: SandboxSpec, keeper: KeeperRecord, endAtMs: number): SandboxMetadata {
  // Keepers from before limits enforced exactly what create asked for, with a cgroup, and no disk size.
  const enforced = keeper.enforced ?? { cpu: spec.cpu, memoryMb: spec.memoryMb, diskMb: null };
  return {
    sandbox_id: spec.id,
    template: specTemplate(spec),
    status: 'running',
    region: 'local',
    started_at: new Date(spec.createdAtMs).toISOString(),
    end_at: new Date(endAtMs).toISOString(),
    cpu_count: enforced.cpu,
    memory_mb: enforced.memoryMb,
    disk_size_mb: enforced.diskMb,
  };
}
