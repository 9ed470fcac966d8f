// snapshot_sandbox on E2B: E2B's own snapshot API (POST /sandboxes/{id}/snapshots, the SDK's
// Sandbox.createSnapshot). E2B pauses the sandbox while it takes the snapshot, memory included,
// and the sandbox then runs on; the snapshot's id is what create_sandbox's `template` takes. A
// name that exists already gets a new build under the same template (E2B's rule).
//
// E2B's snapshot names are the team's, and a snapshot carries no metadata of ours: a user's
// snapshot is told apart by its name. A user's `py-dev` is named `u<10 hex of the SHA-256 of the
// user's name>-py-dev` (userSnapshotPrefix), so it never replaces another principal's snapshot.
// Admins and the operator make shared snapshots under the name as given (one shaped like a user's
// is refused). create refuses a user another user's snapshot however the template is written:
// first by the name as E2B reads it (mayUseE2bName), then by asking E2B which of the team's
// snapshots the reference names (GET /snapshots?name=, which resolves an id, a name, `team/name`
// and `name:tag` as create does) and refusing any of them with another user's name.
import { createHash } from 'node:crypto';
import { Sandbox, SandboxError, type SnapshotInfo } from 'e2b';
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

/** The white space E2B trims from a template reference: Go's unicode.IsSpace, as its id.ParseName's strings.TrimSpace. */
const GO_SPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const E2B_TRIMMED = new RegExp(`^${GO_SPACE}+|${GO_SPACE}+$`, 'g');

/**
 * The alias part of a template reference as E2B reads it (id.ParseName): the tag cut at the first
 * `:`, the namespace at the first `/` before it, trimmed and lowercased.
 */
function aliasOf(template: string): string {
  const identifier = template.replace(E2B_TRIMMED, '').split(':')[0]!;
  return identifier
    .slice(identifier.indexOf('/') + 1)
    .replace(E2B_TRIMMED, '')
    .toLowerCase();
}

/**
 * True when `user` (undefined: the operator or an admin) may name `template` as create takes it
 * (an id, a name, `team/name`, `name:tag`, in any case): anything whose name part is not another
 * user's snapshot's. The name alone: an id says nothing of its owner (assertMayUseE2bTemplate asks E2B).
 */
function mayUseE2bName(template: string, user: string | undefined): boolean {
  if (user === undefined) return true;
  const prefix = USER_SNAPSHOT_NAME.exec(aliasOf(template))?.[0];
  return prefix === undefined || prefix === userSnapshotPrefix(user);
}

/**
 * What create answers a user for another user's snapshot: exactly what it answers for a template
 * E2B does not have (create's 404, which the SDK throws as a SandboxError of status 404).
 */
function e2bTemplateNotFound(): ProviderError {
  const e = new SandboxError('404: template not found');
  e.statusCode = 404;
  return mapE2bError(e);
}

/**
 * The team's snapshots `template` names, as E2B resolves it (GET /snapshots?name=, every page).
 * E2B answers 400 for a reference it cannot parse (create refuses it the same way) or whose
 * namespace is not the team's (create then looks only there, where none of the team's snapshots
 * is): neither names one of them, so that first answer is an empty list. Throws the SDK's errors.
 */
async function snapshotsNamed(template: string, sdkOpts: SdkOpts): Promise<SnapshotInfo[]> {
  const pages = Sandbox.listSnapshots({ ...sdkOpts, name: template });
  const found: SnapshotInfo[] = [];
  let isFirst = true;
  while (pages.hasNext) {
    try {
      found.push(...(await pages.nextItems()));
    } catch (e) {
      if (isFirst && e instanceof SandboxError && e.statusCode === 400) return [];
      throw e;
    }
    isFirst = false;
  }
  return found;
}

/**
 * Refuses (as a missing template: e2bTemplateNotFound) `user` (undefined: the operator or an
 * admin, never refused) a `template` that is another user's snapshot, however it is written: its
 * name part (mayUseE2bName), then every name of every snapshot of the team E2B says it names.
 * Throws the SDK's errors of that lookup, unmapped; on any of them nothing was created.
 */
export async function assertMayUseE2bTemplate(template: string, user: string | undefined, sdkOpts: SdkOpts): Promise<void> {
  if (user === undefined) return;
  if (!mayUseE2bName(template, user)) throw e2bTemplateNotFound();
  for (const snapshot of await snapshotsNamed(template, sdkOpts)) {
    if (![snapshot.snapshotId, ...snapshot.names].every((name) => mayUseE2bName(name, user))) throw e2bTemplateNotFound();
  }
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
