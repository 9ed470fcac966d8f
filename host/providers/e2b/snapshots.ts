// snapshot_sandbox on E2B: E2B's own snapshot API (POST /sandboxes/{id}/snapshots, the SDK's
// Sandbox.createSnapshot). E2B pauses the sandbox while it takes the snapshot, memory included,
// and the sandbox then runs on; the snapshot's id is what create_sandbox's `template` takes. A
// name that exists already gets a new build under the same template (E2B's rule).
//
// E2B's snapshot names are the team's, and a snapshot carries no metadata of ours: a user's
// snapshot is told apart by its name. A user's `py-dev` is named `u<10 hex of the SHA-256 of the
// user's name>-py-dev` (userSnapshotPrefix), so it never replaces another principal's snapshot,
// and create refuses a user a snapshot whose name has another user's prefix. Admins and the
// operator make shared snapshots under the name as given (one shaped like a user's is refused).
import { createHash } from 'node:crypto';
import { NotFoundError, Sandbox } from 'e2b';
import { mapE2bError } from './errors.js';
import { ProviderError } from '../provider-error.js';
import type { SnapshotResult } from '../provider.js';
import type { SdkOpts } from './sdk-opts.js';

/** What snapshot_sandbox tells about an E2B snapshot. */
export const E2B_SNAPSHOT_NOTE =
  "Made by E2B's snapshot API: E2B paused the sandbox while it took the snapshot, then the sandbox ran on. " +
  'Start a sandbox from it with create_sandbox, template set to this value. What E2B restores beyond the files (running processes) is ' +
  "E2B's; this server's tasks are not carried over: start them again there.";

/** How the E2B name of a user's snapshot starts (`u`, 10 hex characters of the SHA-256 of their name, `-`). */
export function userSnapshotPrefix(user: string): string {
  return `u${createHash('sha256').update(user).digest('hex').slice(0, 10)}-`;
}

/** A name shaped like a user's snapshot's. */
const USER_SNAPSHOT_NAME = /^u[0-9a-f]{10}-/;

/**
 * True when `user` (undefined: the operator or an admin) may start a sandbox from `template` as
 * create takes it (an id, a name, `team/name`, `name:tag`): anything but another user's snapshot.
 */
export function mayUseE2bTemplate(template: string, user: string | undefined): boolean {
  if (user === undefined) return true;
  const bare = template
    .toLowerCase()
    .replace(/^[^/]*\//, '')
    .replace(/:[^:]*$/, '');
  const prefix = USER_SNAPSHOT_NAME.exec(bare)?.[0];
  return prefix === undefined || prefix === userSnapshotPrefix(user);
}

/** What create answers a user for another user's snapshot: what it answers for a missing template. */
export function e2bTemplateNotFound(): ProviderError {
  return mapE2bError(new NotFoundError('template not found'));
}

/**
 * Takes an E2B snapshot of the sandbox under `name`: `owner`'s own when given (prefixed), else
 * shared. Throws the SDK's errors, unmapped.
 */
export async function createSnapshot(sandboxId: string, name: string, sdkOpts: SdkOpts, owner?: string): Promise<SnapshotResult> {
  if (owner === undefined && USER_SNAPSHOT_NAME.test(name)) {
    throw new ProviderError('invalid_argument', {
      code: 'bad_template_name',
      detail: "name: names starting with u and 10 hex digits and '-' are users' own.",
    });
  }
  const info = await Sandbox.createSnapshot(sandboxId, { ...sdkOpts, name: owner === undefined ? name : userSnapshotPrefix(owner) + name });
  return { template: info.snapshotId, sizeBytes: null, createdAt: new Date().toISOString(), note: E2B_SNAPSHOT_NOTE };
}
