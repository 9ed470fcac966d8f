// snapshot_sandbox on E2B: E2B's own snapshot API (POST /sandboxes/{id}/snapshots, the SDK's
// Sandbox.createSnapshot). E2B pauses the sandbox while it takes the snapshot, memory included,
// and the sandbox then runs on; the snapshot's id is what create_sandbox's `template` takes. A
// name that exists already gets a new build under the same template (E2B's rule).
import { Sandbox } from 'e2b';
import type { SnapshotResult } from '../provider.js';
import type { SdkOpts } from './sdk-opts.js';

/** What snapshot_sandbox tells about an E2B snapshot. */
export const E2B_SNAPSHOT_NOTE =
  "Made by E2B's snapshot API: E2B paused the sandbox while it took the snapshot, then the sandbox ran on. " +
  'Start a sandbox from it with create_sandbox, template set to this value. What E2B restores beyond the files (running processes) is ' +
  "E2B's; this server's tasks are not carried over: start them again there.";

/** Takes an E2B snapshot of the sandbox under `name`. Throws the SDK's errors, unmapped. */
export async function createSnapshot(sandboxId: string, name: string, sdkOpts: SdkOpts): Promise<SnapshotResult> {
  const info = await Sandbox.createSnapshot(sandboxId, { ...sdkOpts, name });
  return { template: info.snapshotId, sizeBytes: null, createdAt: new Date().toISOString(), note: E2B_SNAPSHOT_NOTE };
}
