// How the disk budget is split over the sandbox's writable mounts. bubblewrap sizes each tmpfs
// it mounts (--size, 0.7+), but a bind source is resolved on the host, so one sized tmpfs cannot
// appear in several places: each writable mount gets a fixed share, and the shares sum to the
// budget. A template sandbox's root is one tmpfs of its own (its writable layer, which holds its
// changes to the template and its /home/user, /tmp and /var/tmp alike) beside /dev/shm; a base
// sandbox's workspace is a tmpfs of its own. The agent's state is a small tmpfs inside the home (or
// the root) in either kind. Pure, unit-tested.
import { posix } from 'node:path';
import { AGENT_STATE_FROM_HOME } from '../../../../shared/agent-state.js';
import { SANDBOX_HOME } from '../../provider.js';

const MIB = 1024 * 1024;

/** The agent's state directory (task logs and statuses): a small mount of its own inside the home (or the root). */
export const AGENT_STATE_MOUNT = posix.join(SANDBOX_HOME, AGENT_STATE_FROM_HOME);

/**
 * Each writable mount's share of a base sandbox's budget, in sixteenths (they sum to 16): the home
 * holds projects and caches, /tmp scratch files, /dev/shm shared memory (64 MiB is Docker's
 * default; an eighth of this is more at every budget of 1 GiB and up), /var/tmp the rare rest. The
 * agent's state has a sixteenth the sandbox's own files cannot take: a command that fills the home
 * (or /tmp) still has its output recorded (128 MiB of the default budget; logs are capped at 1 MiB
 * a stream).
 */
export const DISK_SHARES_SIXTEENTHS: Readonly<Record<string, number>> = {
  [SANDBOX_HOME]: 7,
  [AGENT_STATE_MOUNT]: 1,
  '/tmp': 4,
  '/var/tmp': 2,
  '/dev/shm': 2,
};

/**
 * A base sandbox with a workspace: the workspace's changes (its overlay's upper on a tmpfs of its
 * own) take the largest share, the home keeps room for caches.
 */
export const WORKSPACE_DISK_SHARES_SIXTEENTHS: Readonly<Record<string, number>> = {
  '/workspace': 6,
  [SANDBOX_HOME]: 3,
  [AGENT_STATE_MOUNT]: 1,
  '/tmp': 2,
  '/var/tmp': 2,
  '/dev/shm': 2,
};

/** The same for a template sandbox: its writable root (`/`, which holds a workspace's changes too), the agent's state and /dev/shm. */
export const TEMPLATE_DISK_SHARES_SIXTEENTHS: Readonly<Record<string, number>> = {
  '/': 13,
  [AGENT_STATE_MOUNT]: 1,
  '/dev/shm': 2,
};

/**
 * The shares of a sandbox of any kind (`isTemplate`: it has a writable root of its own;
 * `hasWorkspace`: a workspace, which a template's root tmpfs holds, a base sandbox a tmpfs of its own).
 */
export function diskSharesSixteenths(isTemplate: boolean, hasWorkspace = false): Readonly<Record<string, number>> {
  if (isTemplate) return TEMPLATE_DISK_SHARES_SIXTEENTHS;
  return hasWorkspace ? WORKSPACE_DISK_SHARES_SIXTEENTHS : DISK_SHARES_SIXTEENTHS;
}

/**
 * The writable mounts the sandbox's own files go to: every share but the agent's state, which lies
 * below the home (or root), where the sandbox may put a symlink on the way: the host never stats it.
 */
export function sandboxOwnMounts(isTemplate: boolean, hasWorkspace = false): string[] {
  return Object.keys(diskSharesSixteenths(isTemplate, hasWorkspace)).filter((path) => path !== AGENT_STATE_MOUNT);
}

/** The size in bytes of each writable mount for a budget of `diskMb` MiB; they sum to the budget. */
export function writableMountSizes(diskMb: number, isTemplate = false, hasWorkspace = false): Record<string, number> {
  const sizes: Record<string, number> = {};
  for (const [path, sixteenths] of Object.entries(diskSharesSixteenths(isTemplate, hasWorkspace)))
    sizes[path] = (diskMb * MIB * sixteenths) / 16;
  return sizes;
}
