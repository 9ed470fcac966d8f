// E2B sandbox info → the nine metadata fields, and nothing else: no tokens, user metadata, envd
// version, domain or network settings. E2B has no regions and the SDK drops the REST API's
// diskSizeMB, so region and disk_size_mb are always null.
import type { SandboxMetadata } from '../provider.js';

/** The E2B metadata key holding the principal that created a sandbox (CreateOpts.owner); never disclosed. */
export const OWNER_METADATA_KEY = 'sandbox-mcp-owner';

/** The owner recorded in a sandbox's E2B metadata, or null. */
export function ownerFrom(metadata: Record<string, string> | undefined): string | null {
  return metadata?.[OWNER_METADATA_KEY] ?? null;
}

/** The subset of the SDK's SandboxInfo (getInfo and list items) that metadata is built from. */
export interface E2bInfoLike {
  sandboxId: string;
  templateId?: string;
  name?: string;
  state?: string;
  startedAt?: Date;
  endAt?: Date;
  cpuCount?: number;
  memoryMB?: number;
}

function iso(d: Date | undefined): string | null {
  return d instanceof Date && !Number.isNaN(d.getTime()) ? d.toISOString() : null;
}

function count(n: number | undefined): number | null {
  return typeof n === 'number' && Number.isFinite(n) ? n : null;
}

/** Exactly the nine disclosed fields; `template` prefers the alias the user created it with. */
export function toMetadata(info: E2bInfoLike): SandboxMetadata {
  return {
    sandbox_id: info.sandboxId,
    template: info.name ?? info.templateId ?? null,
    status: info.state ?? null,
    region: null,
    started_at: iso(info.startedAt),
    end_at: iso(info.endAt),
    cpu_count: count(info.cpuCount),
    memory_mb: count(info.memoryMB),
    disk_size_mb: null,
  };
}
