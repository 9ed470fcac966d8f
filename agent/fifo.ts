// Named pipes, made with coreutils' mkfifo: Node's fs has no mknod.
import { childProcess } from './node-modules.js';
import { removeFileQuietly } from './remove-file.js';

const MKFIFO_ARGS = (paths: readonly string[]): string[] => ['-m', '600', ...paths];

/** Creates a FIFO (mode 0600) at each path; false, with none left behind, if mkfifo is unavailable or fails. */
export function makeFifos(paths: readonly string[]): boolean {
  try {
    childProcess().execFileSync('mkfifo', MKFIFO_ARGS(paths), { stdio: 'ignore' });
    return true;
  } catch {
    for (const p of paths) removeFileQuietly(p);
    return false;
  }
}

/**
 * makeFifos, with mkfifo spawned as a task's command is (spawn, detached, waited on through the
 * event loop) rather than by execFileSync: a warm supervisor runs node's spawn path once while it
 * waits, and its command's spawn then costs what a second one does (see warm-supervisor.ts).
 */
export async function makeFifosBySpawn(paths: readonly string[]): Promise<boolean> {
  const isMade = await new Promise<boolean>((resolve) => {
    try {
      const child = childProcess().spawn('mkfifo', MKFIFO_ARGS(paths), { stdio: 'ignore', detached: true });
      child.once('error', () => resolve(false));
      child.once('exit', (code) => resolve(code === 0));
    } catch {
      resolve(false);
    }
  });
  if (!isMade) for (const p of paths) removeFileQuietly(p);
  return isMade;
}
