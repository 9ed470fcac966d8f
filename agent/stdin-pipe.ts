// A task's stdin: a FIFO in the task directory that belongs to the supervisor, not to whoever
// called `start`, so input works from any later process (a restarted host included). The
// supervisor holds the FIFO's write end open for the whole task, so a command reading stdin waits
// instead of seeing EOF; `input` opens the FIFO by name (non-blocking) and writes. EOF needs every
// writer gone, the supervisor's included: `input` with `eof` asks the supervisor by signal to
// close its end, and the supervisor first renames the FIFO to `stdin.closed`, so that no later
// writer can reopen what the command has finished reading.
import { closeSync, constants, existsSync, fstatSync, openSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { makeFifos } from './fifo.js';
import { TASK_FILES } from './paths.js';
import { removeFileQuietly } from './remove-file.js';
import { sleep } from './timing.js';

/** The signal that asks a supervisor to close its task's stdin (SIGUSR1 belongs to node's inspector). */
export const STDIN_EOF_SIGNAL = 'SIGUSR2';

/** The supervisor's hold on a task's stdin FIFO. */
export interface StdinPipe {
  /** Read end, to pass as the command's stdin; close it once the command is spawned. */
  readFd: number;
  /** Marks the FIFO closed and closes the supervisor's write end: EOF once other writers are gone. Idempotent. */
  close(): void;
  /** Closes, then removes the FIFO from the task directory (the end of the task). */
  remove(): void;
}

/** Creates the task's stdin FIFO and holds its write end; null if no FIFO can be made (mkfifo missing). */
export function openStdinPipe(dir: string): StdinPipe | null {
  const path = join(dir, TASK_FILES.stdin);
  const closedPath = join(dir, TASK_FILES.stdinClosed);
  if (!makeFifos([path])) return null;
  let readFd: number | undefined;
  let writeFd: number | undefined;
  try {
    // The reader first, non-blocking, so that opening the writer does not wait for one. The
    // command's copy becomes blocking (libuv makes a child's stdio blocking), as programs expect.
    readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    writeFd = openSync(path, constants.O_WRONLY);
  } catch {
    if (readFd !== undefined) closeSync(readFd);
    removeFileQuietly(path);
    return null;
  }
  let heldFd: number | null = writeFd;
  const close = () => {
    if (heldFd === null) return;
    try {
      renameSync(path, closedPath);
    } catch {
      // removed by hand: nobody can open it by name any more either
    }
    closeSync(heldFd);
    heldFd = null;
  };
  return {
    readFd,
    close,
    remove: () => {
      close();
      removeFileQuietly(closedPath);
    },
  };
}

/** Why the FIFO could not be opened for writing. */
export type StdinOpenFailure = 'missing' | 'closed' | 'no_reader' | 'not_a_fifo';

/** Opens the task's stdin FIFO for a non-blocking write; a failure says why not. */
export function openStdinForInput(dir: string): { fd: number } | { failure: StdinOpenFailure } {
  let fd: number;
  try {
    fd = openSync(join(dir, TASK_FILES.stdin), constants.O_WRONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // ENXIO: a FIFO nobody has open for reading: the command closed its stdin or has exited.
    if (code === 'ENXIO') return { failure: 'no_reader' };
    if (code === 'ENOENT') return { failure: existsSync(join(dir, TASK_FILES.stdinClosed)) ? 'closed' : 'missing' };
    throw err;
  }
  // The command can write in its own state directory: never write into anything but a FIFO.
  if (!fstatSync(fd).isFIFO()) {
    closeSync(fd);
    return { failure: 'not_a_fifo' };
  }
  return { fd };
}

/**
 * Writes `bytes` to a non-blocking pipe, waiting up to `waitMs` in all for room when it is full;
 * returns how many bytes it took. 'no_reader' when the reader went away before any byte was taken.
 */
export async function writeWithin(fd: number, bytes: Buffer, waitMs: number): Promise<number | 'no_reader'> {
  const giveUpAtMs = Date.now() + waitMs;
  let off = 0;
  while (off < bytes.length) {
    try {
      off += writeSync(fd, bytes, off, bytes.length - off);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EPIPE') return off === 0 ? 'no_reader' : off;
      if (code !== 'EAGAIN') throw err;
      // Full: the command is not reading (yet). Wait for room, but never past the bound.
      if (Date.now() >= giveUpAtMs) break;
      await sleep(Math.min(10, Math.max(1, giveUpAtMs - Date.now())));
    }
  }
  return off;
}

/**
 * True once the task's stdin FIFO is gone from its name: renamed by an `eof`, or removed with
 * its finished task. Either way nobody can write to it any more, so an `eof` that asked for it is
 * done — even when the task ended so fast that `stdin.closed` was removed before anyone looked.
 */
export function isStdinFifoGone(dir: string): boolean {
  return !existsSync(join(dir, TASK_FILES.stdin));
}

/** True once the supervisor has marked the task's stdin closed. */
export function isStdinClosed(dir: string): boolean {
  return existsSync(join(dir, TASK_FILES.stdinClosed));
}
