// Applies an image's layers (tar streams, hostile) to one directory, in order, as a container
// runtime does: later layers replace earlier files, whiteouts (`.wh.NAME`) delete them and an
// opaque mark (`.wh..wh..opq`) empties a directory of what lower layers put there. Nothing is
// ever written through a symlink on the host: each member's parent is resolved inside the tree
// (a link is followed as if the tree were `/`, never out of it; resolveInTree), and the member
// itself is replaced, never followed (files opened O_NOFOLLOW|O_EXCL after removal). Set-id bits
// are dropped; owners are kept as numbers on a root server (`native`) and are the server's own
// otherwise (`flattened`, as import does). Devices and FIFOs are left out (a sandbox has its own
// /dev), and so is /dev's content.
import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../../provider-error.js';
import { resolveInTree } from '../file-tree.js';
import type { LayerOwners } from '../store.js';
import { ByteReader, readTar, type TarEntry } from './tar-stream.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
/** Permission bits kept: set-user-ID and set-group-ID are dropped (an image's files are not trusted with them). */
const KEPT_MODE_BITS = 0o1777;

/** What applying layers left to do at the end, and what it skipped. */
export class LayerApplier {
  /** Directories' final modes, applied last (a read-only directory must not stop later layers). */
  private readonly dirModes = new Map<string, number>();
  /** Members left out: devices, FIFOs. */
  skipped = 0;

  constructor(
    private readonly root: string,
    private readonly owners: LayerOwners,
  ) {}

  /** Applies one layer's uncompressed tar stream on top of what is there. */
  async apply(tar: AsyncIterable<Buffer>): Promise<void> {
    const reader = new ByteReader(tar);
    // Host paths this layer wrote: an opaque mark empties only what lower layers left.
    const written = new Set<string>();
    for await (const { entry, body } of readTar(reader)) {
      const parts = memberParts(entry.path);
      if (parts === null) continue;
      if (parts[0] === 'dev' && parts.length > 1) continue;
      const name = parts.pop()!;
      const parent = this.ensureDir(parts);
      if (name.startsWith(WHITEOUT)) {
        if (name === OPAQUE) this.emptyOpaque(parent, written);
        else rmSync(join(parent, name.slice(WHITEOUT.length)), { recursive: true, force: true });
        continue;
      }
      const host = join(parent, name);
      written.add(host);
      switch (entry.type) {
        case 'dir':
          this.placeDir(host, entry);
          break;
        case 'file':
          await this.placeFile(host, entry, body());
          break;
        case 'symlink':
          replace(host);
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

  /** Gives the directories their modes (deepest first), each only while it is still a real directory of the tree. */
  finish(): void {
    const dirs = [...this.dirModes.keys()].sort((a, b) => b.length - a.length);
    for (const dir of dirs) {
      const st = lstatSync(dir, { throwIfNoEntry: false });
      // No link on the way: a later layer may have replaced a parent with a symlink out of the tree.
      if (!st?.isDirectory() || realpathSync(dir) !== dir) continue;
      chmodSync(dir, this.dirModes.get(dir)!);
    }
  }

  /** The host directory for `parts` (inside the tree), made where missing; links followed inside the tree only. */
  private ensureDir(parts: readonly string[]): string {
    let host = this.root;
    for (const part of parts) {
      const next = join(host, part);
      const st = lstatSync(next, { throwIfNoEntry: false });
      if (st === undefined) {
        mkdirSync(next, { mode: 0o755 });
        host = next;
      } else if (st.isDirectory()) {
        host = next;
      } else if (st.isSymbolicLink()) {
        const resolved = resolveInTree(this.root, next.slice(this.root.length));
        if (resolved === null || !lstatSync(resolved).isDirectory())
          throw badLayer('A layer writes under a link that leads to no directory.');
        host = resolved;
      } else {
        replace(next);
        mkdirSync(next, { mode: 0o755 });
        host = next;
      }
    }
    return host;
  }

  private placeDir(host: string, entry: TarEntry): void {
    const st = lstatSync(host, { throwIfNoEntry: false });
    if (!st?.isDirectory()) {
      if (st) replace(host);
      mkdirSync(host, { mode: 0o755 });
    }
    if (this.owners === 'native') lchownSync(host, entry.uid, entry.gid);
    if (host !== this.root) this.dirModes.set(host, entry.mode & KEPT_MODE_BITS);
  }

  private async placeFile(host: string, entry: TarEntry, body: AsyncGenerator<Buffer>): Promise<void> {
    replace(host);
    const fd = openSync(host, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      for await (const chunk of body) {
        for (let at = 0; at < chunk.length;) at += writeSync(fd, chunk, at);
      }
      if (this.owners === 'native') fchownSync(fd, entry.uid, entry.gid);
      fchmodSync(fd, entry.mode & KEPT_MODE_BITS);
      futimesSync(fd, entry.mtimeS, entry.mtimeS);
    } finally {
      closeSync(fd);
    }
  }

  private placeHardLink(host: string, entry: TarEntry): void {
    const parts = memberParts(entry.linkname);
    if (parts === null || parts.length === 0) throw badLayer('A layer has a hard link to nothing.');
    const name = parts.pop()!;
    const dir = resolveInTree(this.root, '/' + parts.join('/'));
    const target = dir === null ? null : join(dir, name);
    const st = target === null ? undefined : lstatSync(target, { throwIfNoEntry: false });
    if (!st || st.isDirectory()) throw badLayer('A layer has a hard link to a file it does not have.');
    if (target === host) return;
    replace(host);
    linkSync(target!, host);
  }

  /** Removes what lower layers left in `dir` (an opaque directory), keeping what this layer wrote. */
  private emptyOpaque(dir: string, written: ReadonlySet<string>): void {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      // Kept: what this layer wrote there, or under it.
      if (written.has(path) || [...written].some((w) => w.startsWith(path + '/'))) continue;
      rmSync(path, { recursive: true, force: true });
    }
  }
}

/** A member's path as tree components, or null for the tree's own top; refuses one that climbs out. */
function memberParts(path: string): string[] | null {
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

/** Removes whatever is at `host` (a file, a link itself, a whole directory) so something else can take its place. */
function replace(host: string): void {
  const st: Stats | undefined = lstatSync(host, { throwIfNoEntry: false });
  if (st === undefined) return;
  rmSync(host, { recursive: st.isDirectory(), force: true });
}

function badLayer(detail: string): ProviderError {
  return new ProviderError('invalid_argument', { code: 'layer_refused', detail });
}
