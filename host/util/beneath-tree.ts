// A tree a sandbox controls, read by the host for the workspace computation (shared/workspace/):
// every path walked one name at a time from directory descriptors (beneath.ts), never through a
// symlink, and a file opened only when it is a regular one (never blocking on a FIFO). The
// directories it opens are kept until `close`, so a walk opens each once.
import type { TreeReader } from '../../shared/workspace/tree-reader.js';
import { entryOf, fdFile } from '../../shared/workspace/tree-reader.js';
import { BeneathDir } from './beneath.js';

/** A TreeReader over a host directory; close it when done. */
export interface BeneathTreeReader extends TreeReader {
  close(): void;
}

function split(rel: string): { parent: string; name: string } {
  const at = rel.lastIndexOf('/');
  return at < 0 ? { parent: '', name: rel } : { parent: rel.slice(0, at), name: rel.slice(at + 1) };
}

/** Reads the tree at `root` (a path of the host's own; see BeneathDir.openRoot), or throws a BeneathError. */
export function beneathTreeReader(root: string, opts: { sameDevice?: boolean } = {}): BeneathTreeReader {
  const top = BeneathDir.openRoot(root, opts);
  // rel → the directory open there, or null where it is not one (or cannot be opened).
  const dirs = new Map<string, BeneathDir | null>([['', top]]);
  function dirAt(rel: string): BeneathDir | null {
    const known = dirs.get(rel);
    if (known !== undefined) return known;
    const { parent, name } = split(rel);
    const up = dirAt(parent);
    let dir: BeneathDir | null;
    try {
      dir = up ? up.openDir(name) : null;
    } catch {
      dir = null;
    }
    dirs.set(rel, dir);
    return dir;
  }
  function inParent<T>(rel: string, fn: (dir: BeneathDir, name: string) => T): T | null {
    if (rel === '') return null;
    const { parent, name } = split(rel);
    const dir = dirAt(parent);
    if (!dir) return null;
    try {
      return fn(dir, name);
    } catch {
      return null;
    }
  }
  return {
    lstat(rel) {
      if (rel === '') return entryOf(top.lstatSelf());
      return inParent(rel, (dir, name) => {
        const st = dir.lstat(name);
        return st ? entryOf(st) : null;
      });
    },
    names(rel) {
      const dir = dirAt(rel);
      if (!dir) return [];
      try {
        return dir.names();
      } catch {
        return [];
      }
    },
    readLink: (rel) => inParent(rel, (dir, name) => dir.readLink(name)),
    open: (rel) => inParent(rel, (dir, name) => fdFile(dir.openFile(name).fd)),
    close() {
      for (const dir of dirs.values()) dir?.close();
      dirs.clear();
    },
  };
}
