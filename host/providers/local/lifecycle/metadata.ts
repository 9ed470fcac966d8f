// What get_sandbox and list_sandboxes show of a local sandbox: its spec and deadline in the
// provider-neutral shape every provider returns.
import type { SandboxMetadata } from '../../provider.js';
import type { SandboxSpec } from '../sandbox/spec.js';

/** The provider-neutral metadata of a running local sandbox. */
export function sandboxMetadata(spec: SandboxSpec, endAtMs: number): SandboxMetadata {
  return {
    sandbox_id: spec.id,
    template: 'base',
    status: 'running',
    region: 'local',
    started_at: new Date(spec.createdAtMs).toISOString(),
    end_at: new Date(endAtMs).toISOString(),
    cpu_count: spec.cpu,
    memory_mb: spec.memoryMb,
    disk_size_mb: null,
  };
}
