import { unlinkSync } from 'node:fs';
import { RUN_CODE_FILE_PATTERN } from '../shared/run-code-file.js';

/** Unlinks `path`; a file that is already gone (or cannot be removed) is no error here. */
export function removeFileQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

/**
 * A request's `remove_file` once its command has ended: unlinked (a symlink by that name goes,
 * never its target), a name already gone no error. Checked against the protocol's pattern again
 * (a task's request file is read back from disk): nothing else is ever removed this way.
 */
export function removeRunFile(path: string | undefined): void {
  if (path !== undefined && RUN_CODE_FILE_PATTERN.test(path)) removeFileQuietly(path);
}
