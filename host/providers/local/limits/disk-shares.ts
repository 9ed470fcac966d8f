// How the disk budget is split over the sandbox's writable mounts. bubblewrap sizes each tmpfs
// it mounts (--size, 0.7+), but a bind source is resolved on the host, so one sized tmpfs cannot
// appear in several places: each writable mount gets a fixed share, and the shares sum to the
// budget. A template sandbox's root is one tmpfs of its own (its writable layer, which holds its
// changes to the template and its /home/user, /tmp and /var/tmp alike) beside /dev/shm. Pure, unit-tested.
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

/** The same for a template sandbox: its writable root (`/`) and /dev/shm. */
export const TEMPLATE_DISK_SHARES_EIGHTHS: Readonly<Record<string, number>> = {
  '/': 7,
  '/dev/shm': 1,
};

/** The shares of a sandbox of either kind (`isTemplate`: it has a writable root of its own). */
export function diskSharesEighths(isTemplate: boolean): Readonly<Record<string, number>> {
  return isTemplate ? TEMPLATE_DISK_SHARES_EIGHTHS : DISK_SHARES_EIGHTHS;
}

/** The size in bytes of each writable mount for a budget of `diskMb` MiB; they sum to the budget. */
export function writableMountSizes(diskMb: number, isTemplate = false): Record<string, number> {
  const sizes: Record<string, number> = {};
  for (const [path, eighths] of Object.entries(diskSharesEighths(isTemplate))) sizes[path] = (diskMb * MIB * eighths) / 8;
  return sizes;
}
