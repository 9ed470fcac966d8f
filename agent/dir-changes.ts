// Waiting for something to happen in a task directory: its status file is replaced by rename and
// its logs grow there, so one inotify watch on the directory (fs.watch) wakes a waiter at once.
// Polling stays the fallback (no inotify, or a change the watch missed), so a wait is never longer
// than its poll interval.
import { watch, type FSWatcher } from 'node:fs';

/** A watch on one directory; close it when done. */
export interface DirChanges {
  /** Resolves at the next change in the directory, or after `ms` at the latest. */
  next(ms: number): Promise<void>;
  close(): void;
}

/**
 * Watches `dir`; with `name`, only changes to that entry wake a waiter (a start waits for the
 * status file: the logs, the reserve and the status's temp file appearing beside it would each
 * wake it for nothing, on the cores the command and its supervisor need).
 */
export function watchDirChanges(dir: string, name?: string): DirChanges {
  const told = toldChanges();
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, { persistent: false }, (_event, changed) => {
      // No name given by the platform: any change counts.
      if (name !== undefined && changed !== null && changed !== name) return;
      told.notify();
    });
    watcher.on('error', () => {});
  } catch {
    watcher = undefined; // no inotify: the poll still finds the change
  }
  return {
    next: (ms) => told.next(ms),
    close() {
      watcher?.close();
    },
  };
}

/** Changes that whoever makes them tells of (`notify`), with no watch: a supervisor that says what it wrote. */
export interface ToldChanges extends DirChanges {
  notify(): void;
}

export function toldChanges(): ToldChanges {
  let wake: () => void = () => {};
  let hasChanged = false;
  return {
    notify() {
      hasChanged = true;
      wake();
    },
    next(ms) {
      // A change since the last look counts: the caller has not seen it yet.
      if (hasChanged) {
        hasChanged = false;
        return Promise.resolve();
      }
      return new Promise<void>((resolve) => {
        const timer = setTimeout(done, ms);
        function done(): void {
          clearTimeout(timer);
          wake = () => {};
          hasChanged = false;
          resolve();
        }
        wake = done;
      });
    },
    close() {},
  };
}
