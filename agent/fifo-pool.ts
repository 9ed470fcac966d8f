// FIFOs made ahead of time for the commands the resident runs: Node's fs has no mknod, so each
// FIFO costs a `mkfifo` process, and a command's start should not wait for one. The pool is a
// directory beside the tasks; a FIFO is taken by renaming it (atomic, so several residents can
// share the pool: a rename that finds the name gone tries the next one) and refilled in the
// background, one mkfifo making a batch.
import { closeSync, constants, mkdirSync, openSync, readdirSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import type { FifoPipe } from './drain-pipes.js';
import { makeFifos } from './fifo.js';
import { childProcess } from './node-modules.js';
import { stateDir } from './paths.js';
import { removeFileQuietly } from './remove-file.js';

/** Refill when fewer than this many are left; a refill makes BATCH. */
const LOW_WATER = 8;
const BATCH = 16;

/** A directory of ready FIFOs, refilled in the background. */
export class FifoPool {
  private readonly dir: string;
  private names: string[] = [];
  private isRefilling = false;
  private counter = 0;

  constructor(dir = join(stateDir(), 'fifos')) {
    this.dir = dir;
  }

  /** Starts filling the pool (in the background). */
  warm(): void {
    this.refill();
  }

  /** Moves a ready FIFO to `path` (made on the spot if the pool is empty); false if none can be made. */
  take(path: string): boolean {
    while (this.names.length > 0 || this.rescan()) {
      const name = this.names.pop()!;
      try {
        renameSync(join(this.dir, name), path);
        if (this.names.length < LOW_WATER) this.refill();
        return true;
      } catch {
        // taken by another resident meanwhile (or removed by hand): try the next
      }
    }
    this.refill();
    return makeFifos([path]);
  }

  /**
   * A pipe made of a pool FIFO whose name is gone: a non-blocking read end and a blocking write
   * end; null if no FIFO can be had (mkfifo missing).
   */
  openPipe(): FifoPipe | null {
    const path = join(this.dir, `.p-${process.pid}-${++this.counter}`);
    if (!this.take(path)) return null;
    let readFd: number | undefined;
    try {
      // The reader first, non-blocking, so that opening the writer does not wait for one.
      readFd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
      return { readFd, writeFd: openSync(path, constants.O_WRONLY) };
    } catch {
      if (readFd !== undefined) closeSync(readFd);
      return null;
    } finally {
      removeFileQuietly(path);
    }
  }

  /** Lists the pool again (another resident may have filled it); true if it holds any. */
  private rescan(): boolean {
    try {
      this.names = readdirSync(this.dir).filter((n) => n.startsWith('f-'));
    } catch {
      this.names = [];
    }
    if (this.names.length === 0) return false;
    // Ours were counted when made; a rescan finds those of every resident (and our own again).
    this.names.sort();
    return true;
  }

  private refill(): void {
    if (this.isRefilling) return;
    this.isRefilling = true;
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    } catch {
      this.isRefilling = false;
      return;
    }
    const batch = Array.from({ length: BATCH }, () => `f-${process.pid}-${++this.counter}`);
    try {
      const child = childProcess().execFile('mkfifo', ['-m', '600', ...batch.map((n) => join(this.dir, n))], { timeout: 10_000 }, (err) => {
        this.isRefilling = false;
        if (!err) this.names.push(...batch);
      });
      child.on('error', () => (this.isRefilling = false));
    } catch {
      this.isRefilling = false;
    }
  }
}
