// Atomically replacing a task's status file. Free of zod on purpose: the supervisor uses it.
import { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskStatus } from '../shared/status.js';
import { TASK_FILES } from './paths.js';

/** Writes `data` to `path` so that a reader sees either the old or the new content, never a mix. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeFileSync(fd, data); // every byte, however many writes that takes
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    // A full disk must not also leave half a temp file for every attempt.
    try {
      unlinkSync(tmp);
    } catch {
      // never created
    }
    throw err;
  }
}

/** Replaces the task's status file atomically (temp file, fsync, rename). */
export function writeStatus(dir: string, status: TaskStatus): void {
  writeFileAtomic(join(dir, TASK_FILES.status), JSON.stringify(status) + '\n');
}
