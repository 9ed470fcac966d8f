// Named pipes, made with coreutils' mkfifo: Node's fs has no mknod.
import { childProcess } from './node-modules.js';
import { removeFileQuietly } from './remove-file.js';

/** Creates a FIFO (mode 0600) at each path; false, with none left behind, if mkfifo is unavailable or fails. */
export function makeFifos(paths: readonly string[]): boolean {
  try {
    childProcess().execFileSync('mkfifo', ['-m', '600', ...paths], { stdio: 'ignore' });
    return true;
  } catch {
    for (const p of paths) removeFileQuietly(p);
    return false;
  }
}
