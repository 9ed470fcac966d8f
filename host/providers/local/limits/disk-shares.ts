// How the disk budget is split over the sandbox's writable mounts. bubblewrap sizes each tmpfs
// it mounts (--size, 0.7+), but a bind source is resolved on the host, so one sized tmpfs cannot
// appear in several places: each writable mount gets a fixed share, and the shares sum to the
// budget. A template sandbox's root is one tmpfs of its own (its writable layer, which holds its
// changes to the template and its /home/user, /tmp and /var/tmp alike) beside /dev/shm; a base
// sandbox's workspace is a tmpfs of its own. Pure, unit-tested.
import { SANDBOX_HOME } from '../../provider.js';

const MIB = 1024 * 1024;

/**
 * Each writable mount's share of a base sandbox's budget, in eighths (they sum to 8): the home
 * holds projects and caches, /tmp scratch files, /dev/shm shared memory (64 MiB is Docker's
 * default; a quarter of this is more at every budget of 2 GiB and up), /var/tmp the rare rest.
 */
export const DISK_SHARES_EIGHTHS: Readonly<Record<string, number>> = {
  [SANDBOX_HOME]: 4,
  '/tmp': 2,
  '/var/tmp': 1,
  '/dev/shm': 1,
};

/**
 * A base sandbox with a workspace: the workspace's changes (its overlay's upper on a tmpfs of its
 * own) take the largest share, the home keeps room for caches.
 */
export const WORKSPACE_DISK_SHARES_EIGHTHS: Readonly<Record<string, number>> = {
  '/workspace': 3,
  [SANDBOX_HOME]: 2,
  '/tmp': 1,
  '/var/tmp': 1,
  '/dev/shm': 1,
};

/** The same for a template sandbox: its writable root (`/`, which holds a workspace's changes too) and /dev/shm. */
export const TEMPLATE_DISK_SHARES_EIGHTHS: Readonly<Record<string, number>> = {
  '/': 7,
  '/dev/shm': 1,
};

/**
 * The shares of a sandbox of any kind (`isTemplate`: it has a writable root of its own;
 * `hasWorkspace`: a workspace, which a template's root tmpfs holds, a base sandbox a tmpfs of its own).
 */
export function diskSharesEighths(isTemplate: boolean, hasWorkspace = false): Readonly<Record<string, number>> {
  if (isTemplate) return TEMPLATE_DISK_SHARES_EIGHTHS;
  return hasWorkspace ? WORKSPACE_DISK_SHARES_EIGHTHS : DISK_SHARES_EIGHTHS;
}

/** The size in bytes of each writable mount for a budget of `diskMb` MiB; they sum to the budget. */
export function writableMountSizes(diskMb: number, isTemplate = false, hasWorkspace = false): Record<string, number> {
  const sizes: Record<string, number> = {};
  for (const [path, eighths] of Object.entries(diskSharesEighths(isTemplate, hasWorkspace))) sizes[path] = (diskMb * MIB * eighths) / 8;
  return sizes;
}
