import { unlinkSync } from 'node:fs';

/** Unlinks `path`; a file that is already gone (or cannot be removed) is no error here. */
export function removeFileQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}
