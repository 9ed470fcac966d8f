// Copying a tree a sandbox controls (a template sandbox's writable layer, its workspace's merged view)
// into a fresh directory of the server's own, as a snapshot needs: the source is walked one name at a
// time from directory descriptors and never through a symlink (util/beneath.ts), so a sandbox swapping
// a directory for a link to a host path mid-copy makes the copy refuse, never read the host. Kept:
// modes, times, owners (a root server's, shifted back from the sandbox's block of ids), hard links,
// extended attributes (overlay's opaque marks, file capabilities), whiteouts, FIFOs and sockets —
// those two through helpers/copy-meta.pl. File data is read from the descriptor opened, at most the
// size it had then; every byte is charged to a budget as it is copied, and the copy stops past it.
// Per directory: its entries are made (subdirectories filled first), then owned, given their extended
// attributes (after chown, which clears capabilities), their modes and their times (last).
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  lchownSync,
  linkSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readSync,
  symlinkSync,
  utimesSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BeneathError, type BeneathDir } from '../../../util/beneath.js';
import { ProviderError } from '../../provider-error.js';
import type { CopyMeta } from './copy-meta.js';
import { bytesOnce } from './file-tree.js';

const { O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW } = constants;

/**
 * What a snapshot does with a path: leave it out, keep it as an empty directory, or keep the
 * directory without its `.deb` files (apt's archives).
 */
export type CopyRule = 'leave' | 'empty' | 'no-debs';

/** Whether `name`, a regular file, is left out of a directory of rule `rule`: a `.deb` in a no-debs one. */
function isLeftOutFile(rule: CopyRule | undefined, name: string, st: Stats): boolean {
  return rule === 'no-debs' && st.isFile() && name.endsWith('.deb');
}

/** Rules by path, one node per name. */
export interface CopyRules {
  rule?: CopyRule;
  children: Map<string, CopyRules>;
}

/** What one copy shares across the trees it copies. */
export interface LayerCopy {
  /** What to subtract from owners in the sandbox's block of ids (0: none). Owners are set by a root server only. */
  ownerShift: number;
  /** Bytes the copy may still take; the error `overCap` makes is thrown past it. */
  budget: { left: number; overCap: () => ProviderError };
  meta: CopyMeta;
}

const CHUNK = 1024 * 1024;
const YIELD_EVERY_MS = 20;
const MAX_SHOWN_PATH = 300;

/** A path of the sandbox's, quoted for a message: `shownAt` is where the tree is in the sandbox. */
export function shownPath(shownAt: string, rel: string): string {
  const full = rel === '' ? shownAt || '/' : `${shownAt}/${rel}`;
  return JSON.stringify(full.length > MAX_SHOWN_PATH ? `${full.slice(0, MAX_SHOWN_PATH)}…` : full);
}

/** Why a copy stops: the sandbox's file unreadable, changed under the copy by the sandbox, or anything else. */
type Reason = 'unreadable' | 'changed' | 'failed';

/**
 * Why a call on the sandbox's side of the copy (a listing, lstat, open, readlink, read, or the
 * helper's reading of attributes) failed, by its errno: the one mapping all of them go through.
 * An entry the sandbox removed or replaced while the copy reached it (gone, now a symlink, a
 * directory no longer one, a stale handle) is the sandbox's change, never a failure of the server's.
 */
function reasonOf(errno: string | undefined): Reason {
  if (errno === 'EACCES' || errno === 'EPERM') return 'unreadable';
  if (errno === 'ENOENT' || errno === 'ELOOP' || errno === 'ESTALE' || errno === 'ENOTDIR') return 'changed';
  return 'failed';
}

/** The refusal for a file the copy could not read or that changed under it. */
function refusal(shownAt: string, rel: string, reason: Reason, errno?: string): ProviderError {
  const path = shownPath(shownAt, rel);
  if (reason === 'unreadable') {
    return new ProviderError('permission_denied', {
      code: 'snapshot_file_unreadable',
      detail:
        `The snapshot could not read ${path}: permission denied (a file the sandbox itself may not read, such as another owner's ` +
        'file of mode 0600 in its workspace). Remove it or make it readable, then snapshot again; nothing was kept.',
    });
  }
  if (reason === 'changed') {
    return new ProviderError('conflict', {
      code: 'snapshot_changed_while_copying',
      detail:
        `${path} changed while the snapshot copied it (a directory or file was replaced, by a symlink or another kind of file). ` +
        'Nothing was kept; snapshot again once the sandbox is done changing it.',
    });
  }
  if (errno === 'ENOSPC' || errno === 'EDQUOT') {
    return new ProviderError('insufficient_resources', {
      code: 'snapshot_disk_full',
      detail: `The server's disk filled up while the snapshot copied ${path}; nothing was kept. Free some space and snapshot again.`,
    });
  }
  return new ProviderError('internal', {
    code: 'snapshot_copy_failed',
    detail: `The snapshot could not copy ${path}${errno ? ` (${errno})` : ''}; nothing was kept.`,
  });
}

/** The refusal for a walk of the sandbox's tree that stopped: what it met, else its errno (reasonOf). */
function refusalOf(err: BeneathError, shownAt: string): ProviderError {
  switch (err.code) {
    case 'permission':
      return refusal(shownAt, err.path, 'unreadable');
    case 'symlink':
    case 'not_directory':
    case 'not_regular':
    case 'not_symlink':
    case 'other_device':
    case 'not_found':
      return refusal(shownAt, err.path, 'changed');
    default:
      return refusal(shownAt, err.path, reasonOf(err.errno), err.errno);
  }
}

/** An entry made in a directory, to be finished (owner, attributes, mode, times) with the directory. */
interface Made {
  name: string;
  dest: string;
  st: Stats;
  kind: 'd' | 'f' | 'l' | 'n';
  /** A node's making by the helper: null once made, else the errno. */
  making?: Promise<string | null>;
}

class Copier {
  private readonly isRoot = process.geteuid?.() === 0;
  private readonly linked = new Map<string, string>();
  private lastYield = performance.now();

  constructor(
    private readonly copy: LayerCopy,
    private readonly shownAt: string,
  ) {}

  /** Copies the entries of `src` into the existing directory `to`, as `rules` say. */
  async copyDir(src: BeneathDir, to: string, rules: CopyRules | undefined): Promise<void> {
    const made: Made[] = [];
    for (const raw of src.rawNames()) {
      const name = raw.toString('utf8');
      if (!Buffer.from(name, 'utf8').equals(raw)) throw this.nameRefused(src.path);
      const entry = await this.copyEntry(src, name, join(to, name), rules?.children.get(name), rules?.rule);
      if (entry) made.push(entry);
      if (performance.now() - this.lastYield > YIELD_EVERY_MS) {
        await nextTurn();
        this.lastYield = performance.now();
      }
    }
    await this.finish(src, made);
  }

  private async copyEntry(
    src: BeneathDir,
    name: string,
    dest: string,
    rules: CopyRules | undefined,
    parentRule: CopyRule | undefined,
  ): Promise<Made | null> {
    const st = src.lstat(name);
    // Removed since the listing: the copy is of the moment each entry is reached.
    if (!st || isLeftOutFile(parentRule, name, st)) return null;
    if (st.isDirectory()) {
      if (rules?.rule === 'leave') return null;
      const sub = openOrNull(() => src.openDir(name));
      if (!sub) return null;
      try {
        const dirSt = fstatSync(sub.fd);
        this.charge(dirSt.size);
        this.onDest(src.childPath(name), () => mkdirSync(dest, { mode: 0o700 }));
        if (rules?.rule !== 'empty') await this.copyDir(sub, dest, rules);
        return { name, dest, st: dirSt, kind: 'd' };
      } finally {
        sub.close();
      }
    }
    // A whiteout left out stays out; under no rule or an emptied path, anything but a directory is copied as it is.
    if (rules?.rule === 'leave') return null;
    if (st.isFile()) return this.copyFile(src, name, dest);
    if (st.isSymbolicLink()) {
      const target = openOrNull(() => src.readLinkRaw(name));
      if (!target) return null;
      this.charge(st.size);
      this.onDest(src.childPath(name), () => symlinkSync(target, dest));
      return { name, dest, st, kind: 'l' };
    }
    if ((st.isCharacterDevice() && st.rdev === 0) || st.isFIFO() || st.isSocket()) {
      // Made by the helper, answered when the directory is finished.
      return { name, dest, st, kind: 'n', making: this.copy.meta.makeNode(dest, st.mode) };
    }
    // A device node: no sandbox can make one.
    throw new ProviderError('unsupported', {
      code: 'snapshot_file_unsupported',
      detail: `${shownPath(this.shownAt, src.childPath(name))} is a device, which a snapshot does not copy; remove it and snapshot again.`,
    });
  }

  private copyFile(src: BeneathDir, name: string, dest: string): Made | null {
    const opened = openOrNull(() => src.openFile(name));
    if (!opened) return null;
    const { fd, stats } = opened;
    const path = src.childPath(name);
    try {
      if (stats.nlink > 1) {
        const key = `${stats.dev}:${stats.ino}`;
        const first = this.linked.get(key);
        if (first !== undefined) {
          this.onDest(path, () => linkSync(first, dest));
          return null;
        }
        this.linked.set(key, dest);
      }
      this.charge(stats.size);
      const out = this.onDest(path, () => openSync(dest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o600));
      try {
        this.copyData(fd, out, stats.size, path);
      } finally {
        closeSync(out);
      }
      return { name, dest, st: stats, kind: 'f' };
    } finally {
      closeSync(fd);
    }
  }

  /** At most `size` bytes (its size when opened: a file growing meanwhile is cut there, one shrinking ends early). */
  private copyData(from: number, to: number, size: number, path: string): void {
    const buf = chunkBuffer();
    let pos = 0;
    while (pos < size) {
      let n: number;
      try {
        n = readSync(from, buf, 0, Math.min(CHUNK, size - pos), pos);
      } catch (err) {
        const errno = (err as NodeJS.ErrnoException).code;
        throw refusal(this.shownAt, path, reasonOf(errno), errno);
      }
      if (n === 0) break;
      this.onDest(path, () => {
        for (let off = 0; off < n;) off += writeSync(to, buf, off, n - off);
      });
      pos += n;
    }
  }

  /** Owners, extended attributes, modes, times of what was made in one directory, in that order. */
  private async finish(src: BeneathDir, made: readonly Made[]): Promise<void> {
    const { ownerShift, meta } = this.copy;
    meta.flush();
    // Made on the server's side (the copy's own directory): a failure there is the server's.
    for (const m of made) {
      const errno = m.making ? await m.making : null;
      if (errno !== null) throw refusal(this.shownAt, src.childPath(m.name), 'failed', errno);
    }
    const shift = (id: number) => (ownerShift !== 0 && id >= ownerShift && id < ownerShift + 65_536 ? id - ownerShift : id);
    if (this.isRoot) {
      for (const m of made) this.onDest(src.childPath(m.name), () => lchownSync(m.dest, shift(m.st.uid), shift(m.st.gid)));
    }
    const asked = made
      .filter((m) => m.kind === 'd' || m.kind === 'f')
      .map((m) => ({ m, answer: meta.copyXattrs(`/proc/${process.pid}/fd/${src.fd}/${m.name}`, m.dest, m.kind as 'd' | 'f') }));
    meta.flush();
    for (const { m, answer } of asked) {
      const errno = await answer;
      if (errno !== null) throw refusal(this.shownAt, src.childPath(m.name), reasonOf(errno), errno);
    }
    for (const m of made) {
      this.onDest(src.childPath(m.name), () => {
        // chmod after chown, which clears set-user-ID and set-group-ID.
        if (m.kind === 'l') lutimesSync(m.dest, m.st.atime, m.st.mtime);
        else {
          chmodSync(m.dest, m.st.mode & 0o7777);
          utimesSync(m.dest, m.st.atime, m.st.mtime);
        }
      });
    }
  }

  private charge(bytes: number): void {
    const budget = this.copy.budget;
    budget.left -= bytes;
    if (budget.left < 0) throw budget.overCap();
  }

  /**
   * Runs a step on the copy's side (the server's own directory, which the sandbox cannot reach),
   * a failure named by the sandbox's path `rel`: the server's failure, never the sandbox's change.
   */
  private onDest<T>(rel: string, step: () => T): T {
    try {
      return step();
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      throw refusal(this.shownAt, rel, 'failed', (err as NodeJS.ErrnoException).code);
    }
  }

  private nameRefused(dirPath: string): ProviderError {
    return new ProviderError('unsupported', {
      code: 'snapshot_name_unsupported',
      detail: `${shownPath(this.shownAt, dirPath)} holds a file whose name is not UTF-8, which a snapshot does not copy; rename it and snapshot again.`,
    });
  }

  /** Turns a walk that stopped into the refusal naming its file. */
  refused(err: unknown): unknown {
    return err instanceof BeneathError ? refusalOf(err, this.shownAt) : err;
  }
}

let sharedChunk: Buffer | undefined;
function chunkBuffer(): Buffer {
  return (sharedChunk ??= Buffer.allocUnsafe(CHUNK));
}

/** The step's result, or null when its name no longer exists (removed since the listing). */
function openOrNull<T>(step: () => T): T | null {
  try {
    return step();
  } catch (err) {
    if (err instanceof BeneathError && err.code === 'not_found') return null;
    throw err;
  }
}

/**
 * Copies the entries of `src` (a tree the sandbox controls, held open) into the existing directory
 * `to`, as `rules` say; `shownAt` names the tree in the sandbox for messages ('' for its root).
 * Throws a ProviderError naming the file for a file unreadable, changed under the copy, or past the budget.
 */
export async function copyBeneath(
  src: BeneathDir,
  to: string,
  rules: CopyRules | undefined,
  copy: LayerCopy,
  shownAt: string,
): Promise<void> {
  const copier = new Copier(copy, shownAt);
  try {
    await copier.copyDir(src, to, rules);
  } catch (err) {
    throw copier.refused(err);
  }
}

/**
 * Bytes the copy of `dir` as `rules` say would take, counted as treeSizeBytes counts (each inode
 * once): walked the same way, never following a link. An estimate: entries that change meanwhile
 * are skipped (the copy itself charges what it copies).
 */
export function bytesBeneath(dir: BeneathDir, rules: CopyRules | undefined, seen = new Set<string>()): number {
  let total = 0;
  let names: string[];
  try {
    names = dir.names();
  } catch {
    return 0;
  }
  for (const name of names) {
    const child = rules?.children.get(name);
    let st: Stats | null;
    try {
      st = dir.lstat(name);
    } catch {
      continue;
    }
    if (!st || child?.rule === 'leave' || isLeftOutFile(rules?.rule, name, st)) continue;
    if (st.isDirectory()) {
      total += st.size;
      if (child?.rule === 'empty') continue;
      let sub: BeneathDir;
      try {
        sub = dir.openDir(name);
      } catch {
        continue;
      }
      total += sub.use((d) => bytesBeneath(d, child, seen));
    } else {
      total += st.isSymbolicLink() ? st.size : bytesOnce(st, seen);
    }
  }
  return total;
}
