// Scratch files and directories a test file makes in the temporary folder (image layouts, mini
// roots, template stores, registries…), removed when the file ends, passed or failed: the
// setup file scratch-cleanup.ts removes them after the file's own afterAll hooks (which stop the
// servers and sandboxes using them). The run's guard (run-tmpdir.ts) fails a run that leaves
// anything else in the folder.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made: string[] = [];

/** A new directory `<tmpdir>/<prefix>XXXXXX` (0700), removed when the test file ends. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** Removes `path` (a file or a tree) when the test file ends; returns it. */
export function removeAtEnd(path: string): string {
  made.push(path);
  return path;
}

/** Removes everything scratchDir made and removeAtEnd was given (as root, whoever owns what is inside). */
export function removeScratch(): void {
  const errors: string[] = [];
  for (const path of made.splice(0).reverse()) {
    try {
      rmSync(path, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      errors.push(`${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  }
  if (errors.length > 0) throw new Error(`could not remove the test's scratch files: ${errors.join('; ')}`);
}
