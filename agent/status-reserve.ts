// Room for a task's final status on a full filesystem. A task that fills the disk (its own logs,
// or files beside them) must still have its outcome recorded, but the final status is written as
// a new file, which a full filesystem refuses. So before the command starts, the supervisor writes
// `status.reserve`: RESERVE_BYTES of real, allocated blanks. When the final status meets ENOSPC,
// it is written into the reserve in place (overwriting allocated blocks needs no free space on
// tmpfs, ext4 or xfs) and the reserve is renamed over status.json (a rename needs none either).
// Where overwriting still allocates (copy-on-write filesystems), the reserve is deleted instead
// and the ordinary write retried in the room that freed. Nothing is taken from the logs.
import { closeSync, fsyncSync, ftruncateSync, lstatSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { TaskStatus } from '../shared/status.js';
import { isNoSpaceError } from './no-space.js';
import { TASK_FILES } from './paths.js';
import { removeFileQuietly } from './remove-file.js';
import { writeStatus } from './status-file.js';

/** Size of the reserve: a status record is under 1 KiB; this covers a few filesystem blocks of any size in use. */
export const RESERVE_BYTES = 16 * 1024;

/** Thrown when the final status cannot be written even with the reserve. */
export class StatusNotWritten extends Error {}

/** Writes the task's reserve; false (and nothing left behind) when the filesystem is already full. */
export function createStatusReserve(dir: string): boolean {
  return writeReserveFile(join(dir, TASK_FILES.statusReserve));
}

/**
 * Moves a reserve made ahead (a warm supervisor's, `made`) into the task's directory, or writes
 * one there when there is none or it cannot be moved; false when the filesystem is already full.
 */
export function placeStatusReserve(made: string | null, dir: string): boolean {
  if (made !== null) {
    try {
      renameSync(made, join(dir, TASK_FILES.statusReserve));
      return true;
    } catch {
      removeFileQuietly(made);
    }
  }
  return createStatusReserve(dir);
}

/** Writes RESERVE_BYTES of allocated blanks at `path`; false (and nothing left behind) when the filesystem is full. */
export function writeReserveFile(path: string): boolean {
  try {
    const fd = openSync(path, 'w', 0o600);
    try {
      // Written, not just sized: a sparse file would hold no blocks to overwrite later. No fsync:
      // space is accounted when written (even under delayed allocation), and a crash loses nothing.
      writeAll(fd, Buffer.alloc(RESERVE_BYTES, 0x20));
    } finally {
      closeSync(fd);
    }
    return true;
  } catch (err) {
    removeFileQuietly(path);
    if (isNoSpaceError(err)) return false;
    throw err;
  }
}

/** True when `path` is a reserve as writeReserveFile leaves it: a file (no link) of RESERVE_BYTES, all allocated. */
export function isReserveFile(path: string): boolean {
  try {
    const st = lstatSync(path, { throwIfNoEntry: false });
    return st !== undefined && st.isFile() && st.size === RESERVE_BYTES && st.blocks * 512 >= RESERVE_BYTES;
  } catch {
    return false;
  }
}

/**
 * Writes the final status atomically, spending the reserve only if the filesystem is full; throws
 * StatusNotWritten when even that fails. The reserve is gone from the task's directory afterwards
 * either way: unused, it is moved to `keepReserveAt` when given (a reused supervisor's next task
 * takes it, not written again), else deleted.
 */
export function writeFinalStatus(dir: string, status: TaskStatus, keepReserveAt?: string): void {
  const reserve = join(dir, TASK_FILES.statusReserve);
  try {
    writeStatus(dir, status);
  } catch (err) {
    if (!isNoSpaceError(err)) throw err;
    return writeFinalStatusFull(dir, status, reserve);
  }
  if (keepReserveAt !== undefined) {
    try {
      renameSync(reserve, keepReserveAt);
      return;
    } catch {
      // not there (or not movable): deleted below, and the next task's is written
    }
  }
  removeFileQuietly(reserve);
}

/** writeFinalStatus on a full filesystem: into the reserve, else in the room its deletion frees. */
function writeFinalStatusFull(dir: string, status: TaskStatus, reserve: string): void {
  if (writeIntoReserve(reserve, join(dir, TASK_FILES.status), JSON.stringify(status) + '\n')) return;
  // The reserve could not take the record in place: free its blocks and try the ordinary way once more.
  removeFileQuietly(reserve);
  try {
    writeStatus(dir, status);
  } catch (err) {
    if (isNoSpaceError(err)) throw new StatusNotWritten('the state directory is full: the final status could not be written');
    throw err;
  }
}

/** Overwrites the reserve's first bytes with `text`, trims it and renames it over `target`; false if any step fails. */
function writeIntoReserve(reserve: string, target: string, text: string): boolean {
  let fd: number;
  try {
    fd = openSync(reserve, 'r+'); // no O_TRUNC: truncating first would give the blocks away
  } catch {
    return false;
  }
  try {
    const bytes = Buffer.from(text);
    if (bytes.length > RESERVE_BYTES) return false;
    writeAll(fd, bytes);
    ftruncateSync(fd, bytes.length);
    fsyncSync(fd);
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(reserve, target);
    return true;
  } catch {
    return false;
  }
}

function writeAll(fd: number, bytes: Buffer): void {
  let off = 0;
  while (off < bytes.length) off += writeSync(fd, bytes, off, bytes.length - off, off);
}
