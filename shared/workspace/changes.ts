// What a sandbox changed in its workspace: the files, symlinks and directories added, modified
// (content, or only the mode) and deleted, comparing the tree the workspace started from (`base`)
// with the one the sandbox sees now (`current`). Two ways to find the candidates:
//   - with `upper`, an overlay's upper directory (local sandboxes): everything the sandbox wrote
//     is there — copied-up and new files, whiteouts for deletions, directories it touched — so
//     only those paths are looked at, and deletions are what `base` lists and `current` no longer
//     does in those directories (whiteouts and opaque directories alike, no xattrs needed);
//   - without, a walk of both trees (an e2b sandbox's copy), trusting equal size, mtime and mode
//     as unchanged, as git's index does.
// Content is compared byte for byte where it may differ. `.git` (a repository's own files) is never
// part of the changes. Reads the trees through TreeReaders (tree-reader.ts): plain paths inside
// the sandbox, no-follow descriptors on the host.
import { join } from 'node:path';
import { EXCLUDED_NAMES, type WorkspaceChangeKind, type WorkspaceEntryKind } from './contract.js';
import { pathTreeReader, readFull, type TreeEntry, type TreeReader, type TreeReaders } from './tree-reader.js';

/** One changed path. */
export interface WorkspaceChange {
  /** Relative to the workspace, `/`-separated. */
  path: string;
  change: WorkspaceChangeKind;
  kind: WorkspaceEntryKind;
  /** Permission bits as four octal digits (`0644`); null where the path does not exist on that side. */
  mode_before: string | null;
  mode_after: string | null;
  /** Bytes of the file (after; before, when deleted), of a symlink's target; null for directories. */
  size: number | null;
  /** A symlink's target now; null for anything else, or a deleted one. */
  link_target: string | null;
}

/** Where the trees are. */
export interface WorkspaceTrees {
  /** The workspace as it was at create. */
  base: string;
  /** The workspace as the sandbox sees it now. */
  current: string;
  /** The overlay's upper directory, when `current` is an overlay of `base` (see the module comment). */
  upper?: string;
}

/** Four octal digits. */
export function formatMode(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

const CHUNK_BYTES = 64 * 1024;

/** True when both files hold the same bytes (read in chunks; an unreadable file differs). */
function sameContent(a: TreeReader, b: TreeReader, rel: string): boolean {
  const fileA = a.open(rel);
  const fileB = fileA ? b.open(rel) : null;
  try {
    if (!fileA || !fileB) return false;
    const bufA = Buffer.alloc(CHUNK_BYTES);
    const bufB = Buffer.alloc(CHUNK_BYTES);
    for (;;) {
      const nA = readFull(fileA, bufA);
      const nB = readFull(fileB, bufB);
      if (nA !== nB || !bufA.subarray(0, nA).equals(bufB.subarray(0, nB))) return false;
      if (nA < CHUNK_BYTES) return true;
    }
  } catch {
    return false;
  } finally {
    fileA?.close();
    fileB?.close();
  }
}

function sameLink(a: TreeReader, b: TreeReader, rel: string): boolean {
  const target = a.readLink(rel);
  return target !== null && target === b.readLink(rel);
}

/** Collects the changes of one comparison; see collectChanges. */
class Comparison {
  readonly changes: WorkspaceChange[] = [];

  constructor(private readonly trees: TreeReaders) {}

  private record(path: string, change: WorkspaceChangeKind, node: TreeEntry, before: TreeEntry | null, after: TreeEntry | null): void {
    if (node.kind === 'other') return;
    this.changes.push({
      path,
      change,
      kind: node.kind,
      mode_before: before ? formatMode(before.mode) : null,
      mode_after: after ? formatMode(after.mode) : null,
      size: node.kind === 'directory' ? null : node.size,
      link_target: node.kind === 'symlink' && after ? this.trees.current.readLink(path) : null,
    });
  }

  /** `rel` and, for a directory, everything below it, as added from `current`. */
  private added(rel: string, node: TreeEntry): void {
    this.record(rel, 'added', node, null, node);
    if (node.kind !== 'directory') return;
    for (const name of this.trees.current.names(rel)) {
      if (EXCLUDED_NAMES.includes(name)) continue;
      const child = join(rel, name);
      const n = this.trees.current.lstat(child);
      if (n) this.added(child, n);
    }
  }

  /** `rel` and, for a directory, everything below it, as deleted from `base`. */
  private deleted(rel: string, node: TreeEntry): void {
    this.record(rel, 'deleted', node, node, null);
    if (node.kind !== 'directory') return;
    for (const name of this.trees.base.names(rel)) {
      if (EXCLUDED_NAMES.includes(name)) continue;
      const child = join(rel, name);
      const n = this.trees.base.lstat(child);
      if (n) this.deleted(child, n);
    }
  }

  /**
   * Compares one path present on at least one side. `mayTrustStat`: equal size, mtime and mode
   * mean unchanged (the full walk); otherwise content decides (a copied-up file may be unchanged).
   * Returns true when both sides are directories (the caller decides whether to look inside).
   */
  compare(rel: string, mayTrustStat: boolean): boolean {
    const before = this.trees.base.lstat(rel);
    const after = this.trees.current.lstat(rel);
    if (!before && !after) return false;
    if (!before) {
      this.added(rel, after!);
      return false;
    }
    if (!after) {
      this.deleted(rel, before);
      return false;
    }
    if (before.kind === 'directory' && after.kind === 'directory') return true;
    if (before.kind !== after.kind) {
      this.deleted(rel, before);
      this.added(rel, after);
      return false;
    }
    if (before.kind === 'other') return false;
    const isStatEqual = before.size === after.size && before.mtimeMs === after.mtimeMs && before.mode === after.mode;
    if (mayTrustStat && isStatEqual) return false;
    const isSame =
      before.kind === 'symlink'
        ? sameLink(this.trees.base, this.trees.current, rel)
        : before.size === after.size && sameContent(this.trees.base, this.trees.current, rel);
    if (!isSame) this.record(rel, 'modified', after, before, after);
    else if (before.kind === 'file' && before.mode !== after.mode) this.record(rel, 'mode_changed', after, before, after);
    return false;
  }

  /** Names `base` has in directory `rel` that `current` no longer has: deleted, whatever the upper says about how. */
  deletionsIn(rel: string): void {
    const now = new Set(this.trees.current.names(rel));
    for (const name of this.trees.base.names(rel)) {
      if (EXCLUDED_NAMES.includes(name) || now.has(name)) continue;
      const child = join(rel, name);
      const n = this.trees.base.lstat(child);
      if (n) this.deleted(child, n);
    }
  }
}

/** The paths the upper directory holds below `rel` (a directory on both sides), compared; recursing where it holds directories. */
function walkUpper(cmp: Comparison, upper: TreeReader, rel: string): void {
  cmp.deletionsIn(rel);
  for (const name of upper.names(rel)) {
    if (EXCLUDED_NAMES.includes(name)) continue;
    const child = join(rel, name);
    // A whiteout's deletion was found by deletionsIn; a directory's own entry may be new or old.
    if (upper.lstat(child)?.isWhiteout) continue;
    if (cmp.compare(child, false)) walkUpper(cmp, upper, child);
  }
}

/** Every path of either tree below `rel` (a directory on both sides), compared. */
function walkBoth(cmp: Comparison, trees: TreeReaders, rel: string): void {
  const all = new Set([...trees.base.names(rel), ...trees.current.names(rel)]);
  for (const name of all) {
    if (EXCLUDED_NAMES.includes(name)) continue;
    const child = join(rel, name);
    if (cmp.compare(child, true)) walkBoth(cmp, trees, child);
  }
}

/** Sorts by path, bytewise (parents before their children). */
function byPath(a: WorkspaceChange, b: WorkspaceChange): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/**
 * Every change from `trees.base` to `trees.current`, sorted by path (a directory before what it
 * holds). A path whose type changed (a file that became a directory, say) is deleted and added.
 * Types other than files, symlinks and directories (fifos, sockets, devices) are not reported.
 */
export function collectChanges(trees: WorkspaceTrees): WorkspaceChange[] {
  return collectChangesFrom(treeReaders(trees));
}

/** The readers of trees named by path (inside the sandbox). */
export function treeReaders(trees: WorkspaceTrees): TreeReaders {
  const readers: TreeReaders = { base: pathTreeReader(trees.base), current: pathTreeReader(trees.current) };
  if (trees.upper !== undefined) readers.upper = pathTreeReader(trees.upper);
  return readers;
}

/** collectChanges over trees read by `trees`' readers (the host's no-follow ones, say). */
export function collectChangesFrom(trees: TreeReaders): WorkspaceChange[] {
  const cmp = new Comparison(trees);
  if (trees.upper) walkUpper(cmp, trees.upper, '');
  else walkBoth(cmp, trees, '');
  return cmp.changes.sort(byPath);
}

/**
 * The changes at `paths` alone (each compared by content, a directory's own entry only unless
 * added or deleted whole), sorted, each path and kind of change once: the host checking the paths
 * an e2b sandbox's agent nominates against what it read itself.
 */
export function collectChangesAt(trees: TreeReaders, paths: Iterable<string>): WorkspaceChange[] {
  const cmp = new Comparison(trees);
  for (const path of new Set(paths)) cmp.compare(path, false);
  const seen = new Set<string>();
  return cmp.changes
    .filter((c) => {
      const key = `${c.change}\0${c.path}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort(byPath);
}
