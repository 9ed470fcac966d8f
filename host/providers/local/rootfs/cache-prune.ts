// Removing what the cache keeps (cache-dir.ts cachedDir: the agent runtimes, the base views' /etc)
// that nobody can still need. Every node binary a server ran on left a runtime of about 100 MB (a
// copy, once the node it was linked from is gone), and nothing else ever removes one. An entry goes
// only when all of these hold:
// - it is ours: a directory (never a symlink) named by a key, owned by this euid (the root cache is
//   shared: nothing else in it is touched);
// - it is not the running server's own;
// - nobody handed it out for a day: cachedDir sets its mtime each time it hands it out, and a server
//   binds what it got within a minute and a create (HostViews looks again after a minute), so an
//   entry a day old is one no server is about to bind; the day is that minute with a wide margin
//   (a stalled create, a clock step, a suspended machine), at the cost of a day's leftovers;
// - no live mount shows it: a sandbox binds its runtime for its whole life, and removing the files
//   of a bound directory empties it inside the sandbox too (same inode). The mounts of every live
//   process (/proc/<pid>/mountinfo, readable by any user) name each bind's source by its
//   path within its file system, which differs from ours where the cache is reached through another
//   bind (a CI run binds its own cache at /var/cache/sandbox-mcp): an entry is kept when its key is
//   a component of any mount's root, whatever the device (btrfs subvolumes report another one).
//   A mountinfo that cannot be read leaves everything in place.
// The entry is renamed away before it is removed (a concurrent reader sees it whole or not at all)
// and put back if someone handed it out meanwhile. The files go in the background: freeing a
// runtime's copied blocks took about 120 ms each here (ext4 with discard), too long to hold a
// create or the event loop for dozens. A removal cut short leaves a `.tmp-` name, which
// removeStaleTemporaries clears.
import { randomBytes } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';

/** How long an entry stays unused before it may go (see the module comment). */
export const CACHE_PRUNE_MIN_AGE_MS = 24 * 60 * 60_000;

/** The names cachedDir gives its entries: a key of 16 hex digits. */
const ENTRY_NAME = /^[0-9a-f]{16}$/;

/** What one prune did. */
export interface PruneResult {
  /** Entries removed: gone from their names at return, their files once `done` settles. */
  removed: string[];
  /** Old entries kept because a live mount shows them. */
  bound: string[];
  /** True when the live mounts could not all be read, so nothing was removed. */
  isUnsure: boolean;
  /** Settles (never rejects) when the removed entries' files are gone. */
  done: Promise<void>;
}

export interface PruneOpts {
  /** Entries never removed (the running server's own). */
  keep?: readonly string[];
  minAgeMs?: number;
  nowMs?: number;
  /** Where the live processes are listed (tests). */
  procDir?: string;
}

/**
 * The entry names (keys) that are a path component of the root of some live process's mount. Every
 * process's mountinfo is read: two of one mount namespace may see different mounts (a chroot shows
 * only what is below it). Null when a live process's mounts could not be read.
 */
export function keysOfLiveMounts(procDir = '/proc'): Set<string> | null {
  const keys = new Set<string>();
  for (const pid of readdirSync(procDir)) {
    if (!/^\d+$/.test(pid)) continue;
    let text: string;
    try {
      text = readFileSync(join(procDir, pid, 'mountinfo'), 'latin1');
    } catch (e) {
      // Ended meanwhile, or a zombie (EINVAL: no mount namespace left): its mounts went with it.
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ESRCH' || code === 'EINVAL') continue;
      return null;
    }
    for (const line of text.split('\n')) {
      // The 4th field: the root of the mount within its file system (octal escapes never touch a key).
      const root = line.split(' ', 4)[3];
      if (root === undefined) continue;
      for (const part of root.split('/')) if (ENTRY_NAME.test(part)) keys.add(part);
    }
  }
  return keys;
}

/**
 * Removes the entries of `parent` (a cachedDir parent: the cache's `runtime` or `base-etc`) that
 * nobody can still need (see the module comment). Lists `parent`; reads the live mounts only when
 * some entry is old enough. Throws only when `parent` cannot be listed.
 */
export function pruneCacheEntries(parent: string, opts: PruneOpts = {}): PruneResult {
  const result: PruneResult = { removed: [], bound: [], isUnsure: false, done: Promise.resolve() };
  const nowMs = opts.nowMs ?? Date.now();
  const minAgeMs = opts.minAgeMs ?? CACHE_PRUNE_MIN_AGE_MS;
  const euid = process.geteuid?.() ?? 0;
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return result;
    throw e;
  }
  const old = new Map<string, number>();
  for (const name of names) {
    if (!ENTRY_NAME.test(name) || opts.keep?.includes(name)) continue;
    try {
      const st = lstatSync(join(parent, name));
      if (st.isDirectory() && st.uid === euid && nowMs - st.mtimeMs > minAgeMs) old.set(name, st.mtimeMs);
    } catch {
      // Gone meanwhile.
    }
  }
  if (old.size === 0) return result;
  const bound = keysOfLiveMounts(opts.procDir);
  if (bound === null) return { ...result, isUnsure: true };
  const trashes: string[] = [];
  for (const [name, mtimeMs] of old) {
    if (bound.has(name)) {
      result.bound.push(name);
      continue;
    }
    const trash = takeAway(parent, name, mtimeMs);
    if (trash === null) continue;
    result.removed.push(name);
    trashes.push(trash);
  }
  const removals = trashes.map((trash) => rm(trash, { recursive: true, force: true }).catch(() => undefined));
  return { ...result, done: Promise.all(removals).then(() => undefined) };
}

/**
 * Renames `parent/name` to a `.tmp-` name unless it was handed out since its mtime was `mtimeMs`;
 * returns that name (to be removed), or null when it stays (or is gone).
 */
function takeAway(parent: string, name: string, mtimeMs: number): string | null {
  const dir = join(parent, name);
  const trash = join(parent, `.tmp-prune-${name}-${randomBytes(4).toString('hex')}`);
  try {
    renameSync(dir, trash);
  } catch {
    // Gone meanwhile.
    return null;
  }
  try {
    if (lstatSync(trash).mtimeMs === mtimeMs) return trash;
  } catch {
    // Removed meanwhile (by removeStaleTemporaries: it was old).
    return null;
  }
  // Handed out between the look and the rename: its taker binds it by path within a create.
  try {
    renameSync(trash, dir);
  } catch {
    // A fresh copy is in its place already: that one is bound instead, and this one goes.
    return trash;
  }
  return null;
}
