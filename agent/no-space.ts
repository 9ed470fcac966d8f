// A full filesystem under the state directory, recognised where it happens (a write failing with
// ENOSPC or EDQUOT) and where it can only be inferred (a reader finding no room left).
import { statfsSync } from 'node:fs';
import { AgentFailure } from './errors.js';

/** Below this much free space (or with no free inode) the state directory counts as full. */
const FULL_BELOW_BYTES = 16 * 1024;

/** True for the errors a full filesystem or an exhausted quota produce. */
export function isNoSpaceError(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

/**
 * True when the filesystem holding `path` has (almost) no space or no inode left for this user.
 * False when that cannot be told (statfs failing says nothing about space).
 */
export function hasNoSpaceLeft(path: string): boolean {
  try {
    const fs = statfsSync(path);
    // tmpfs without an inode limit reports files = 0 and ffree = 0: that is not "no inode left".
    return fs.bavail * fs.bsize < FULL_BELOW_BYTES || (fs.files > 0 && fs.ffree === 0);
  } catch {
    return false;
  }
}

/** The `state_dir_full` failure an op answers when task state cannot be written. */
export function stateDirFull(): AgentFailure {
  return new AgentFailure(
    'state_dir_full',
    'the filesystem holding the agent state directory is full (no space or no inodes left): remove files you no longer need (run_command with rm), then retry',
  );
}

/**
 * Where `path` is and how much room its filesystem has left, for a message: "the filesystem of
 * PATH (N KiB free)"; without the figure when statfs fails.
 */
export function fullFilesystemText(path: string): string {
  try {
    const fs = statfsSync(path);
    return `the filesystem of ${path} (${Math.floor((fs.bavail * fs.bsize) / 1024)} KiB free)`;
  } catch {
    return `the filesystem of ${path}`;
  }
}
