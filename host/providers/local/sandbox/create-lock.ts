// One lock per state directory, held while a create counts the live sandboxes and makes its
// own directory, so that --max-sandboxes holds for every server process sharing the directory
// (several stdio clients, each with a server, is the common case). It is flock(2) on a file in the
// sandboxes directory: the kernel drops it when its holder dies, so no stale lock is ever left.
// Node has no flock; a `flock` child (util-linux) takes the lock on the open file description
// it shares with this process, which keeps the lock after the child exits, until the descriptor
// is closed here.
import { spawn } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS, spawnFailureError } from '../errors.js';

/** The lock file in the sandboxes directory (a name no sandbox id can have). */
export const CREATE_LOCK_FILE = '.create.lock';

/** How long a create waits for the lock: it is held for a few file operations, never across a wait. */
const LOCK_WAIT_S = 10;

/** Exit status of `flock -w` that gave up waiting. */
const FLOCK_TIMED_OUT = 1;

/** Takes the lock on `fd` (an open file) through a `flock` child; resolves once it is held. */
function lockFd(flock: string, fd: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(flock, ['--exclusive', '--wait', String(LOCK_WAIT_S), '3'], {
      cwd: '/',
      env: {},
      stdio: ['ignore', 'ignore', 'ignore', fd],
    });
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(spawnFailureError(err, new ProviderError('unavailable', { code: 'flock_missing', detail: LOCAL_DETAILS.flockMissing }))),
    );
    child.on('exit', (code) => {
      if (code === 0) resolve();
      else if (code === FLOCK_TIMED_OUT)
        reject(new ProviderError('unavailable', { code: 'create_lock_busy', detail: LOCAL_DETAILS.createLockBusy }));
      else reject(new ProviderError('internal', { code: 'create_lock_failed' }));
    });
  });
}

/**
 * Runs `critical` (synchronous: nothing may wait while the lock is held) under the state
 * directory's create lock, and returns what it returned.
 */
export async function withCreateLock<T>(sandboxes: string, flock: string, critical: () => T): Promise<T> {
  const fd = openSync(join(sandboxes, CREATE_LOCK_FILE), constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  try {
    await lockFd(flock, fd);
    return critical();
  } finally {
    // The last descriptor of the open file description: closing it releases the lock.
    closeSync(fd);
  }
}
