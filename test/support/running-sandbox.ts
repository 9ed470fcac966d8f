// The metadata an in-memory provider of the unit tests reports for its sandboxes.
import type { SandboxMetadata } from '../../host/providers/provider.js';

/** A running `base` sandbox with no times or limits, as a stand-in provider reports it. */
export function runningSandbox(id: string): SandboxMetadata {
  return {
    sandbox_id: id,
    template: 'base',
    status: 'running',
    region: 'local',
    started_at: null,
    end_at: null,
    cpu_count: null,
    memory_mb: null,
    disk_size_mb: null,
  };
}
