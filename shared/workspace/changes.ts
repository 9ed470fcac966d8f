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
// part of the changes. Runs where the trees are (the agent, inside the sandbox) with node:fs only.
import { closeSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { EXCLUDED_NAMES, type WorkspaceChangeKind, type WorkspaceEntryKind } from './contract.js';

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

type Kind = WorkspaceEntryKind | 'other';

interface Node {
  kind: Kind;
  /** Permission bits. */
  mode: number;
  size: number;
  mtimeMs: number;
}

function lstatNode(path: string): Node | null {
  let st: Stats;
  try {
    st = lstatSync(path);
  } catch {
    return null;
  }
  return { kind: kindOf(st), mode: st.mode & 0o7777, size: st.size, mtimeMs: st.mtimeMs };
}

function kindOf(st: Stats): Kind {
  if (st.isFile()) return 'file';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isDirectory()) return 'directory';
  return 'other';
}

/** A whiteout: overlayfs marks a deleted lower path with a 0/0 character device in the upper. */
function isWhiteout(path: string): boolean {
  try {
    const st = lstatSync(path);
    return st.isCharacterDevice() && st.rdev === 0;
  } catch {
    return false;
  }
}

function names(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Four octal digits. */
export function formatMode(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

const CHUNK_BYTES = 64 * 1024;

/** True when both files hold the same bytes (read in chunks; an unreadable file differs). */
function sameContent(pathA: string, pathB: string): boolean {
  let fdA: number | undefined;
  let fdB: number | undefined;
  try {
    fdA = openSync(pathA, 'r');
    fdB = openSync(pathB, 'r');
    const bufA = Buffer.alloc(CHUNK_BYTES);
    const bufB = Buffer.alloc(CHUNK_BYTES);
    for (;;) {
      const nA = readFull(fdA, bufA);
      const nB = readFull(fdB, bufB);
      if (nA !== nB || !bufA.subarray(0, nA).equals(bufB.subarray(0, nB))) return false;
      if (nA < CHUNK_BYTES) return true;
    }
  } catch {
    return false;
  } finally {
    if (fdA !== undefined) closeSync(fdA);
    if (fdB !== undefined) closeSync(fdB);
  }
}

function readFull(fd: number, buf: Buffer): number {
  let n = 0;
  while (n < buf.length) {
    const got = readSync(fd, buf, n, buf.length - n, null);
    if (got === 0) break;
    n += got;
  }
  return n;
}

function readLink(path: string): string | null {
  try {
    return readlinkSync(path);
  } catch {
    return null;
  }
}

function sameLink(pathA: string, pathB: string): boolean {
  try {
    return readlinkSync(pathA) === readlinkSync(pathB);
  } catch {
    return false;
  }
}

/** Collects the changes of one comparison; see collectChanges. */
class Comparison {
  readonly changes: WorkspaceChange[] = [];

  constructor(private readonly trees: WorkspaceTrees) {}

  private base(rel: string): string {
    return join(this.trees.base, rel);
  }

  private current(rel: string): string {
    return join(this.trees.current, rel);
  }

  private record(path: string, change: WorkspaceChangeKind, node: Node, before: Node | null, after: Node | null): void {
    if (node.kind === 'other') return;
    this.changes.push({
      path,
      change,
      kind: node.kind,
      mode_before: before ? formatMode(before.mode) : null,
      mode_after: after ? formatMode(after.mode) : null,
      size: node.kind === 'directory' ? null : node.size,
      link_target: node.kind === 'symlink' && after ? readLink(this.current(path)) : null,
    });
  }

  /** `rel` and, for a directory, everything below it, as added from `current`. */
  private added(rel: string, node: Node): void {
    this.record(rel, 'added', node, null, node);
    if (node.kind !== 'directory') return;
    for (const name of names(this.current(rel))) {
      if (EXCLUDED_NAMES.includes(name)) continue;
      const child = join(rel, name);
      const n = lstatNode(this.current(child));
      if (n) this.added(child, n);
    }
  }

  /** `rel` and, for a directory, everything below it, as deleted from `base`. */
  private deleted(rel: string, node: Node): void {
    this.record(rel, 'deleted', node, node, null);
    if (node.kind !== 'directory') return;
    for (const name of names(this.base(rel))) {
      if (EXCLUDED_NAMES.includes(name)) continue;
      const child = join(rel, name);
      const n = lstatNode(this.base(child));
      if (n) this.deleted(child, n);
    }
  }

  /**
   * Compares one path present on at least one side. `mayTrustStat`: equal size, mtime and mode
   * mean unchanged (the full walk); otherwise content decides (a copied-up file may be unchanged).
   * Returns true when both sides are directories (the caller decides whether to look inside).
   */
  compare(rel: string, mayTrustStat: boolean): boolean {
    const before = lstatNode(this.base(rel));
    const after = lstatNode(this.current(rel));
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
        ? sameLink(this.base(rel), this.current(rel))
        : before.size === after.size && sameContent(this.base(rel), this.current(rel));
    if (!isSame) this.record(rel, 'modified', after, before, after);
    else if (before.kind === 'file' && before.mode !== after.mode) this.record(rel, 'mode_changed', after, before, after);
    return false;
  }

  /** Names `base` has in directory `rel` that `current` no longer has: deleted, whatever the upper says about how. */
  deletionsIn(rel: string): void {
    const now = new Set(names(this.current(rel)));
    for (const name of names(this.base(rel))) {
      if (EXCLUDED_NAMES.includes(name) || now.has(name)) continue;
      const child = join(rel, name);
      const n = lstatNode(this.base(child));
      if (n) this.deleted(child, n);
    }
  }
}

/** The paths the upper directory holds below `rel` (a directory on both sides), compared; recursing where it holds directories. */
function walkUpper(cmp: Comparison, upper: string, rel: string): void {
  cmp.deletionsIn(rel);
  for (const name of names(join(upper, rel))) {
    if (EXCLUDED_NAMES.includes(name)) continue;
    const child = join(rel, name);
    // A whiteout's deletion was found by deletionsIn; a directory's own entry may be new or old.
    if (isWhiteout(join(upper, child))) continue;
    if (cmp.compare(child, false)) walkUpper(cmp, upper, child);
  }
}

/** Every path of either tree below `rel` (a directory on both sides), compared. */
function walkBoth(cmp: Comparison, trees: WorkspaceTrees, rel: string): void {
  const all = new Set([...names(join(trees.base, rel)), ...names(join(trees.current, rel))]);
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
  const cmp = new Comparison(trees);
  if (trees.upper !== undefined) walkUpper(cmp, trees.upper, '');
  else walkBoth(cmp, trees, '');
  return cmp.changes.sort(byPath);
}
