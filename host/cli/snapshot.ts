// `sandbox-mcp snapshot <sandbox_id> NAME`: what the snapshot_sandbox tool does, from the command
// line — a running sandbox's files saved as a new template, the sandbox left running.
import type { ServerDeps } from '../mcp/server-deps.js';
import { SnapshotResultSchema } from '../mcp/tools/snapshot.js';
import { noSnapshots, type SnapshotOpts } from '../providers/provider.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import { formatBytes } from './format.js';
import type * as z from 'zod';

/** What `snapshot --json` prints: the tool's result. */
export { SnapshotResultSchema };
export type SnapshotOutput = z.infer<typeof SnapshotResultSchema>;

/** Takes the snapshot. Throws the provider's error (not_found, unsupported, insufficient_resources…). */
export async function snapshotSandbox(
  deps: Pick<ServerDeps, 'providers'>,
  sandbox: SandboxRef,
  name: string,
  opts: SnapshotOpts = {},
): Promise<SnapshotOutput> {
  const provider = deps.providers.get(sandbox.provider);
  if (!provider.snapshot) throw noSnapshots();
  const made = await provider.snapshot(sandbox.id, name, opts);
  return {
    sandbox_id: sandbox.qualified,
    template: made.template,
    size_bytes: made.sizeBytes,
    created_at: made.createdAt,
    note: made.note,
  };
}

/** The lines `snapshot` prints for people. */
export function snapshotLines(result: SnapshotOutput): string {
  const size = result.size_bytes === null ? '' : ` (${formatBytes(result.size_bytes)})`;
  return `saved ${result.sandbox_id} as template ${result.template}${size}\n${result.note}\n`;
}
