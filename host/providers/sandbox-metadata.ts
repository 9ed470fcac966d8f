// The nine metadata fields a sandbox discloses, with its id qualified: the shape the lifecycle
// tools return and `sandbox-mcp ls` prints, so it lives beside the qualified id, not in either.
import * as z from 'zod';
import type { ProviderId } from './sandbox-ref.js';
import type { SandboxMetadata } from './provider.js';
import { qualify } from './sandbox-ref.js';

/** Exactly the nine metadata fields, the id qualified. */
export const MetadataSchema = z.strictObject({
  sandbox_id: z.string(),
  template: z.string().nullable(),
  status: z.string().nullable(),
  region: z.string().nullable(),
  started_at: z.string().nullable(),
  end_at: z.string().nullable(),
  cpu_count: z.number().nullable(),
  memory_mb: z.number().nullable(),
  disk_size_mb: z.number().nullable(),
});

/** A provider's metadata with its id qualified, and nothing but the nine fields. */
export function qualifyMetadata(provider: ProviderId, m: SandboxMetadata): z.infer<typeof MetadataSchema> {
  return {
    sandbox_id: qualify(provider, m.sandbox_id).qualified,
    template: m.template,
    status: m.status,
    region: m.region,
    started_at: m.started_at,
    end_at: m.end_at,
    cpu_count: m.cpu_count,
    memory_mb: m.memory_mb,
    disk_size_mb: m.disk_size_mb,
  };
}
