// Each layer of a container image written as a store layer of its own, on the store layers of the
// image layers under it (shared by chain id, see docs/templates.md). The layer's tar is hostile.
// What it says is applied as a container runtime applies it on an overlay, to the view the
// sandbox's overlay will show (the merged stack), with only the differences written into the new
// layer:
//   - a member's parent is resolved in the merged view: a link (in any layer) is followed as if
//     the stack were `/`, never out of it; each directory on the way that only a lower layer has
//     is made in this layer with the lower's mode (and owner, `native`): a copy-up;
//   - `.wh.NAME` removes what this layer has there and, when a lower layer shows NAME, leaves an
//     overlay whiteout (a character device 0/0) in its place; `.wh..wh..opq` marks the directory
//     opaque (`trusted.overlay.opaque` as root, `user.overlay.opaque` otherwise: the attribute the
//     server's sandboxes' overlay reads) and the layer's record lists it, so that the layers made
//     on top read it without xattrs; a directory made where this layer had a whiteout is opaque too;
//   - a hard link to a file of a lower layer copies that file up into this layer (at its own
//     path, with its mode, owner and times: what an overlay does on link()) and links to the copy;
//   - members are replaced, never followed (files opened O_CREAT|O_EXCL|O_NOFOLLOW after
//     removal); set-id bits are dropped; owners are kept as numbers on a root server (`native`)
//     and are the server's own otherwise (`flattened`, where apt is also told to stay root);
//     devices, FIFOs and /dev's contents are left out; directories' modes are applied last.
// Every layer is read without following a link out of it: a path is only looked up in a layer
// where each directory above it has been seen (lstat) to be a real directory.
import {
  chmodSync,
  closeSync,
  constants,
  copyFileSync,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../../provider-error.js';
import { readUpTo } from '../../../../util/read-up-to.js';
import type { CopyMeta } from '../copy-meta.js';
import { FLATTENED_APT_CONF } from '../import-root.js';
import type { LayerOwners } from '../store.js';
import { ByteReader, readTar, type TarEntry } from './tar-stream.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
/** Permission bits kept: set-user-ID and set-group-ID are dropped (an image's files are not trusted with them). */
const KEPT_MODE_BITS = 0o1777;
/** Most symlinks followed resolving one path, as the kernel's own bound. */
const MAX_LINKS = 40;
/** The overlay attribute a server's sandboxes read: `trusted.` as root, `user.` otherwise (their overlay has `userxattr`). */
const OPAQUE_XATTR = { native: 'trusted.overlay.opaque', flattened: 'user.overlay.opaque' } as const;

/** A layer of the stack: its files and the directories it marks opaque (relative paths, '' for its top). */
export interface StackLayer {
  root: string;
  opaque: ReadonlySet<string>;
}

/** What a path names in the merged view: the layer showing it (0: the top) and its lstat there. */
interface Found {
  layer: number;
  st: Stats;
}

function isWhiteout(st: Stats): boolean {
  return st.isCharacterDevice() && st.rdev === 0;
}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

function keyOf(parts: readonly string[]): string {
  return parts.join('/');
}

/**
 * The merged view of a stack of layers, top first, as an overlay shows it: the top (index 0) may
 * change (the layer being written: lookups of it are never cached); the ones under it never do.
 */
export class StackView {
  /** For a directory's key: the lower layers (indices ≥ 1) that show something in it, top first. */
  private readonly lowerDirCache = new Map<string, number[]>();
  /** Keys the top layer has been seen to have as real directories (dropped whenever a directory of it is removed). */
  private readonly topDirs = new Set<string>(['']);

  constructor(
    /** Top first. */
    readonly layers: readonly StackLayer[],
  ) {}

  /** The lower layers showing their files in directory `parts` (a directory there, unhidden), top first; [] when none does. */
  private lowerDirLayers(parts: readonly string[]): number[] {
    const cached = this.lowerDirCache.get(keyOf(parts));
    if (cached) return cached;
    // From the top down, each directory's from its parent's (a loop: a path may be deep).
    let candidates = this.layers.map((_, i) => i).slice(1);
    let key = '';
    for (let n = 0; n <= parts.length; n++) {
      key = n === 0 ? '' : n === 1 ? parts[0]! : `${key}/${parts[n - 1]}`;
      const known = this.lowerDirCache.get(key);
      if (known) {
        candidates = known;
        continue;
      }
      const out: number[] = [];
      for (const i of candidates) {
        const st = lstatOrUndefined(join(this.layers[i]!.root, key));
        if (!st) continue;
        // A whiteout, or something other than a directory, hides this path in every layer under it.
        if (!st.isDirectory()) break;
        out.push(i);
        if (this.layers[i]!.opaque.has(key)) break;
      }
      this.lowerDirCache.set(key, out);
      candidates = out;
    }
    return candidates;
  }

  /** True when each of `parts` is a real directory in the top layer (no link on the way). */
  topHasDir(parts: readonly string[]): boolean {
    // A key is only remembered once every directory above it was: the whole path known says it all.
    if (this.topDirs.has(keyOf(parts))) return true;
    let key = '';
    for (const part of parts) {
      key = key === '' ? part : `${key}/${part}`;
      if (this.topDirs.has(key)) continue;
      if (!lstatOrUndefined(join(this.layers[0]!.root, key))?.isDirectory()) return false;
      this.topDirs.add(key);
    }
    return true;
  }

  /** Says that the top layer lost a directory (removed or replaced): what was seen of its directories no longer holds. */
  forgetTopDirs(): void {
    this.topDirs.clear();
    this.topDirs.add('');
  }

  /** True when the top layer hides what the lower layers have in directory `parts` (it or a directory above it is opaque). */
  private topHidesLowers(parts: readonly string[]): boolean {
    const opaque = this.layers[0]!.opaque;
    if (opaque.size === 0) return false;
    if (opaque.has('')) return true;
    let key = '';
    for (const part of parts) {
      key = key === '' ? part : `${key}/${part}`;
      if (opaque.has(key)) return true;
    }
    return false;
  }

  /** What a lower layer shows at `name` in directory `parts` (already known to be a directory of the merged view). */
  lowerEntry(parts: readonly string[], name: string): Found | undefined {
    if (this.topHidesLowers(parts)) return undefined;
    for (const i of this.lowerDirLayers(parts)) {
      const st = lstatOrUndefined(join(this.layers[i]!.root, ...parts, name));
      if (!st) continue;
      return isWhiteout(st) ? undefined : { layer: i, st };
    }
    return undefined;
  }

  /** What the merged view shows at `name` in its directory `parts`: undefined when nothing (or a whiteout). */
  entry(parts: readonly string[], name: string): Found | undefined {
    if (this.topHasDir(parts)) {
      const st = lstatOrUndefined(join(this.layers[0]!.root, ...parts, name));
      if (st) return isWhiteout(st) ? undefined : { layer: 0, st };
    }
    return this.lowerEntry(parts, name);
  }

  /**
   * Resolves `path` (components) in the merged view, links followed as if the stack were `/`
   * (the last one too when `followLast`): the canonical components and what is there, or null
   * when something on the way is missing or not a directory.
   */
  resolve(path: readonly string[], followLast: boolean): { parts: string[]; found: Found } | null {
    const queue = [...path];
    let cur: string[] = [];
    let links = 0;
    while (queue.length > 0) {
      const part = queue.shift()!;
      if (part === '' || part === '.') continue;
      if (part === '..') {
        cur.pop();
        continue;
      }
      const found = this.entry(cur, part);
      if (!found) return null;
      const last = queue.every((p) => p === '' || p === '.');
      if (found.st.isSymbolicLink() && (!last || followLast)) {
        if (++links > MAX_LINKS) return null;
        const target = readlinkSync(join(this.layers[found.layer]!.root, ...cur, part));
        if (target.startsWith('/')) cur = [];
        queue.unshift(...target.split('/'));
        continue;
      }
      if (last) return { parts: [...cur, part], found };
      if (!found.st.isDirectory()) return null;
      cur.push(part);
    }
    return { parts: cur, found: { layer: 0, st: lstatSync(this.layers[0]!.root) } };
  }

  /** True when absolute `path` is a real directory in the merged view, with no link on the way (none is followed). */
  isRealDir(path: string): boolean {
    const parts = path.split('/').filter((p) => p !== '' && p !== '.');
    if (parts.includes('..')) return false;
    for (let n = 0; n < parts.length; n++) {
      if (!this.entry(parts.slice(0, n), parts[n]!)?.st.isDirectory()) return false;
    }
    return true;
  }

  /** The regular file `name` of a real directory `dir` at the top of the merged view (no link on the way), as text; '' when none. */
  readEtc(dir: string, name: string, maxBytes: number): string {
    const d = this.entry([], dir);
    if (!d?.st.isDirectory()) return '';
    const f = this.entry([dir], name);
    if (!f?.st.isFile()) return '';
    const fd = openSync(join(this.layers[f.layer]!.root, dir, name), constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      return readUpTo(fd, maxBytes).toString('utf8');
    } finally {
      closeSync(fd);
    }
  }
}

/** What writing one layer gave: the directories it marks opaque and how many members it left out. */
export interface WrittenLayer {
  opaqueDirs: string[];
  skipped: number;
}

/**
 * Writes one image layer (its uncompressed tar stream) into `root` (which does not exist yet) on
 * top of `lowers` (top first). `meta` makes whiteouts and opaque marks (helpers/copy-meta.pl).
 */
export async function writeStackLayer(
  root: string,
  lowers: readonly StackLayer[],
  tar: AsyncIterable<Buffer>,
  meta: CopyMeta,
  owners: LayerOwners,
): Promise<WrittenLayer> {
  mkdirSync(root, { mode: 0o755 });
  const top = lowers[0] ? lstatSync(lowers[0].root) : undefined;
  if (top) {
    if (owners === 'native') lchownSync(root, top.uid, top.gid);
    chmodSync(root, top.mode & KEPT_MODE_BITS);
  }
  const writer = new StackLayerWriter(root, lowers, meta, owners);
  await writer.apply(tar);
  return writer.finish();
}

class StackLayerWriter {
  private readonly opaque = new Set<string>();
  private readonly view: StackView;
  /** Directories' final modes, applied last (a read-only directory must not stop later members). */
  private readonly dirModes = new Map<string, number>();
  private skipped = 0;

  constructor(
    private readonly root: string,
    lowers: readonly StackLayer[],
    private readonly meta: CopyMeta,
    private readonly owners: LayerOwners,
  ) {
    this.view = new StackView([{ root, opaque: this.opaque }, ...lowers]);
  }

  async apply(tar: AsyncIterable<Buffer>): Promise<void> {
    const reader = new ByteReader(tar);
    for await (const { entry, body } of readTar(reader)) {
      const parts = memberParts(entry.path);
      if (parts === null) continue;
      if (parts[0] === 'dev' && parts.length > 1) continue;
      const name = parts.pop()!;
      const parent = this.ensureDir(parts);
      if (name.startsWith(WHITEOUT)) {
        if (name === OPAQUE) this.opaque.add(keyOf(parent));
        else await this.whiteout(parent, name.slice(WHITEOUT.length));
        continue;
      }
      const host = join(this.root, ...parent, name);
      switch (entry.type) {
        case 'dir':
          this.placeDir(parent, name, entry);
          break;
        case 'file':
          this.replace(host);
          await placeFile(host, entry, body(), this.owners);
          break;
        case 'symlink':
          this.replace(host);
          symlinkSync(entry.linkname, host);
          if (this.owners === 'native') lchownSync(host, entry.uid, entry.gid);
          break;
        case 'hardlink':
          this.placeHardLink(host, entry);
          break;
        case 'other':
          this.skipped++;
          break;
      }
    }
    // A compressed layer's checksum trailer is read (and checked by the decompressor) only at its end.
    await reader.drain();
  }

  /** Gives directories their modes (deepest first) and marks the opaque ones, each only while it is a real directory of the layer. */
  async finish(): Promise<WrittenLayer> {
    if (this.owners === 'flattened') this.addFlattenedAptSetting();
    const dirs = [...this.dirModes.keys()].sort((a, b) => b.length - a.length);
    for (const dir of dirs) if (this.isRealDir(dir)) chmodSync(dir, this.dirModes.get(dir)!);
    const opaqueDirs: string[] = [];
    for (const key of [...this.opaque].sort()) {
      const host = key === '' ? this.root : join(this.root, key);
      if (!this.isRealDir(host)) continue;
      const failed = await this.ask(() => this.meta.markOpaque(host, OPAQUE_XATTR[this.owners]));
      if (failed) throw metaFailed('mark a directory opaque', failed);
      opaqueDirs.push(key);
    }
    return { opaqueDirs, skipped: this.skipped };
  }

  /**
   * A flattened stack's apt is told to stay root (its `_apt` cannot be switched to in such a
   * sandbox: import-root.ts): the layer adds the setting wherever the merged view has apt's
   * configuration directory without it. It depends on this layer and those under it only, as the
   * layer's id does (its chain id).
   */
  private addFlattenedAptSetting(): void {
    const parts = FLATTENED_APT_CONF.path.split('/').filter((p) => p !== '');
    const name = parts.pop()!;
    const dir = this.view.resolve(parts, true);
    if (!dir?.found.st.isDirectory() || this.view.entry(dir.parts, name)) return;
    this.materialize(dir.parts);
    const host = join(this.root, ...dir.parts, name);
    const fd = openSync(host, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      writeSync(fd, FLATTENED_APT_CONF.text);
    } finally {
      closeSync(fd);
    }
  }

  /** Removes whatever this layer has at `host` (a file, a link itself, a whole directory) so something else can take its place. */
  private replace(host: string): void {
    const st = lstatOrUndefined(host);
    if (st === undefined) return;
    rmSync(host, { recursive: st.isDirectory(), force: true });
    if (st.isDirectory()) this.view.forgetTopDirs();
  }

  private isRealDir(host: string): boolean {
    // No link on the way: a later member may have replaced a parent with a symlink out of the tree.
    return lstatOrUndefined(host)?.isDirectory() === true && realpathSync(host) === host;
  }

  private async ask(request: () => Promise<string | null>): Promise<string | null> {
    const answer = request();
    this.meta.flush();
    return answer;
  }

  /**
   * The canonical components of the member's parent `parts` in the merged view, each directory
   * on the way present in this layer (made where missing). A link is followed inside the stack;
   * one that leads to no directory is refused; anything else that is not a directory is replaced.
   */
  private ensureDir(parts: readonly string[]): string[] {
    let cur: string[] = [];
    let links = 0;
    const queue = parts.map((part) => ({ part, viaLink: false }));
    while (queue.length > 0) {
      const { part, viaLink } = queue.shift()!;
      if (part === '' || part === '.') continue;
      if (part === '..') {
        cur.pop();
        continue;
      }
      const found = this.view.entry(cur, part);
      if (found?.st.isDirectory()) {
        cur.push(part);
        continue;
      }
      if (found?.st.isSymbolicLink()) {
        if (++links > MAX_LINKS) throw badLayer('A layer writes under a link that leads to no directory.');
        const target = readlinkSync(join(this.view.layers[found.layer]!.root, ...cur, part));
        if (target.startsWith('/')) cur = [];
        queue.unshift(...target.split('/').map((p) => ({ part: p, viaLink: true })));
        continue;
      }
      if (viaLink) throw badLayer('A layer writes under a link that leads to no directory.');
      this.makeDir(cur, part);
      cur.push(part);
    }
    this.materialize(cur);
    return cur;
  }

  /** Makes each directory of the merged view's `parts` a real directory of this layer (a lower's: with its mode and owner). */
  private materialize(parts: readonly string[]): void {
    if (this.view.topHasDir(parts)) return;
    for (let n = 1; n <= parts.length; n++) {
      const host = join(this.root, ...parts.slice(0, n));
      const st = lstatOrUndefined(host);
      if (st?.isDirectory()) continue;
      const lower = this.view.lowerEntry(parts.slice(0, n - 1), parts[n - 1]!);
      if (st || !lower?.st.isDirectory()) throw new ProviderError('internal', { code: 'layer_stack_inconsistent' });
      mkdirSync(host, { mode: 0o700 });
      if (this.owners === 'native') lchownSync(host, lower.st.uid, lower.st.gid);
      this.dirModes.set(host, lower.st.mode & KEPT_MODE_BITS);
    }
  }

  /** Makes directory `name` in this layer's `parts` (which the merged view has as a directory), replacing what this layer has there. */
  private makeDir(parts: readonly string[], name: string): void {
    this.materialize(parts);
    const host = join(this.root, ...parts, name);
    const st = lstatOrUndefined(host);
    if (st) this.replace(host);
    mkdirSync(host, { mode: 0o755 });
    // Where this layer had a whiteout, the lower layers' files stay hidden.
    if (st && isWhiteout(st)) this.opaque.add(keyOf([...parts, name]));
  }

  private async whiteout(parts: readonly string[], name: string): Promise<void> {
    const host = join(this.root, ...parts, name);
    this.replace(host);
    if (!this.view.lowerEntry(parts, name)) return;
    const failed = await this.ask(() => this.meta.makeNode(host, constants.S_IFCHR));
    if (failed) throw metaFailed('make a whiteout', failed);
  }

  private placeDir(parts: readonly string[], name: string, entry: TarEntry): void {
    const host = join(this.root, ...parts, name);
    if (!lstatOrUndefined(host)?.isDirectory()) this.makeDir(parts, name);
    if (this.owners === 'native') lchownSync(host, entry.uid, entry.gid);
    this.dirModes.set(host, entry.mode & KEPT_MODE_BITS);
  }

  private placeHardLink(host: string, entry: TarEntry): void {
    const parts = memberParts(entry.linkname);
    if (parts === null || parts.length === 0) throw badLayer('A layer has a hard link to nothing.');
    const name = parts.pop()!;
    const dir = this.view.resolve(parts, true);
    const dirParts = dir === null ? null : dir.parts;
    const found = dirParts === null || !dir!.found.st.isDirectory() ? undefined : this.view.entry(dirParts, name);
    if (!found || found.st.isDirectory()) throw badLayer('A layer has a hard link to a file it does not have.');
    const target = join(this.root, ...dirParts!, name);
    if (target === host) return;
    // A file of a lower layer: copied up into this one first (at its own path), as an overlay does on link().
    if (found.layer > 0) this.copyUp(dirParts!, name, found);
    this.replace(host);
    linkSync(target, host);
  }

  private copyUp(parts: readonly string[], name: string, found: Found): void {
    this.materialize(parts);
    const from = join(this.view.layers[found.layer]!.root, ...parts, name);
    const to = join(this.root, ...parts, name);
    this.replace(to);
    if (found.st.isSymbolicLink()) {
      symlinkSync(readlinkSync(from), to);
      if (this.owners === 'native') lchownSync(to, found.st.uid, found.st.gid);
      return;
    }
    if (!found.st.isFile()) throw badLayer('A layer has a hard link to a file it does not have.');
    copyFileSync(from, to, constants.COPYFILE_EXCL);
    if (this.owners === 'native') lchownSync(to, found.st.uid, found.st.gid);
    chmodSync(to, found.st.mode & KEPT_MODE_BITS);
    utimesSync(to, found.st.atime, found.st.mtime);
  }
}

/** Writes a regular file at `host` (where nothing is now). */
async function placeFile(host: string, entry: TarEntry, body: AsyncGenerator<Buffer>, owners: LayerOwners): Promise<void> {
  const fd = openSync(host, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    for await (const chunk of body) {
      for (let at = 0; at < chunk.length;) at += writeSync(fd, chunk, at);
    }
    if (owners === 'native') fchownSync(fd, entry.uid, entry.gid);
    fchmodSync(fd, entry.mode & KEPT_MODE_BITS);
    futimesSync(fd, entry.mtimeS, entry.mtimeS);
  } finally {
    closeSync(fd);
  }
}

/** Longest member path (or hard link target) taken: Linux's PATH_MAX, which no path in a layer can pass. */
const MAX_MEMBER_PATH = 4096;

/** A member's path as tree components, or null for the tree's own top; refuses one that climbs out. */
function memberParts(path: string): string[] | null {
  if (Buffer.byteLength(path) > MAX_MEMBER_PATH) throw badLayer(`A layer has a member whose path is longer than ${MAX_MEMBER_PATH} bytes.`);
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) throw badLayer('A layer has a member whose path leads out of the root (../).');
      parts.pop();
      continue;
    }
    parts.push(part);
  }
  return parts.length === 0 ? null : parts;
}

function badLayer(detail: string): ProviderError {
  return new ProviderError('invalid_argument', { code: 'layer_refused', detail });
}

function metaFailed(what: string, errno: string): ProviderError {
  return new ProviderError('internal', { code: 'layer_meta_failed', detail: `Could not ${what} in an image layer (${errno}).` });
}
