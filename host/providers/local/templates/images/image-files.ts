// The files of an image on disk, however it is packed: a directory (an OCI image layout) or a tar
// archive of one (an OCI layout, or what `docker save` / `podman save` write), read in place. A
// tar archive is indexed once (its members' offsets) and each file then read from its offset.
// Links inside an archive (docker save links a layer it holds twice) are followed inside it only.
import { closeSync, createReadStream, lstatSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { ProviderError } from '../../../provider-error.js';
import { decodeHeader, paddingAfter, TAR_BLOCK, type PendingMeta } from './tar-stream.js';

/** Largest JSON file (index, manifest, config) read whole. */
const MAX_JSON_BYTES = 8 << 20;

/** Read access to an image's files by their relative path. */
export interface ImageFiles {
  has(path: string): boolean;
  /** The file's bytes as a stream. */
  open(path: string): Readable;
  /** A small file, whole (JSON documents). */
  read(path: string): Buffer;
}

function tooLarge(): ProviderError {
  return new ProviderError('invalid_argument', { code: 'image_file_too_large', detail: "An image's JSON document is larger than 8 MiB." });
}

/** A directory's files; `blobsDir` (a shared blob store) answers for `blobs/…` when given. */
export function directoryFiles(dir: string, blobsDir?: string): ImageFiles {
  const where = (path: string) => (blobsDir !== undefined && path.startsWith('blobs/') ? join(blobsDir, path.slice(6)) : join(dir, path));
  return {
    has: (path) => statSync(where(path), { throwIfNoEntry: false })?.isFile() === true,
    open: (path) => createReadStream(where(path)),
    read: (path) => {
      if (statSync(where(path)).size > MAX_JSON_BYTES) throw tooLarge();
      return readFileSync(where(path));
    },
  };
}

interface Member {
  offset: number;
  size: number;
  link?: string;
}

/** The first bytes of a file (to tell a tar archive from compressed data). */
export function fileHead(path: string, bytes = 512): Buffer {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    return buf.subarray(0, readSync(fd, buf, 0, bytes, 0));
  } finally {
    closeSync(fd);
  }
}

/** True when the file starts with a tar header (`ustar` magic at 257): not compressed. */
export function isPlainTar(path: string): boolean {
  if (!lstatSync(path).isFile()) return false;
  return fileHead(path).subarray(257, 262).toString('latin1') === 'ustar';
}

/** Indexes an uncompressed tar archive's regular files and links by reading its headers only; its files are then read in place. */
export function tarFiles(archive: string): ImageFiles {
  const members = new Map<string, Member>();
  const fd = openSync(archive, 'r');
  try {
    const pending: PendingMeta = { pax: new Map() };
    const block = Buffer.alloc(TAR_BLOCK);
    for (let at = 0; ;) {
      if (readSync(fd, block, 0, TAR_BLOCK, at) < TAR_BLOCK) break;
      at += TAR_BLOCK;
      const header = decodeHeader(block, pending);
      if (header.kind === 'end') break;
      if (header.kind === 'meta') {
        const data = Buffer.alloc(header.size);
        readSync(fd, data, 0, header.size, at);
        header.apply(data);
        at += header.size + paddingAfter(header.size);
        continue;
      }
      const { entry } = header;
      const path = posix.normalize(entry.path).replace(/^(\.\/|\/)+/, '');
      if (entry.type === 'file') members.set(path, { offset: at, size: entry.size });
      else if (entry.type === 'symlink') members.set(path, { offset: 0, size: 0, link: posix.join(posix.dirname(path), entry.linkname) });
      else if (entry.type === 'hardlink') members.set(path, { offset: 0, size: 0, link: posix.normalize(entry.linkname) });
      at += header.dataBytes + paddingAfter(header.dataBytes);
    }
  } finally {
    closeSync(fd);
  }
  const find = (path: string): Member | undefined => {
    let m = members.get(posix.normalize(path));
    for (let hops = 0; m?.link !== undefined && hops < 8; hops++) m = members.get(posix.normalize(m.link));
    return m?.link === undefined ? m : undefined;
  };
  const open = (path: string): Readable => {
    const m = find(path);
    if (!m)
      throw new ProviderError('invalid_argument', {
        code: 'image_file_missing',
        detail: 'The image archive lacks a file its manifest names.',
      });
    // An empty range still needs a stream: end before start reads nothing.
    return createReadStream(archive, m.size === 0 ? { start: 1, end: 0 } : { start: m.offset, end: m.offset + m.size - 1 });
  };
  return {
    has: (path) => find(path) !== undefined,
    open,
    read: (path) => {
      const m = find(path);
      if (m && m.size > MAX_JSON_BYTES) throw tooLarge();
      const fd = openSync(archive, 'r');
      try {
        const buf = Buffer.alloc(m?.size ?? 0);
        if (m) readSync(fd, buf, 0, m.size, m.offset);
        if (!m) open(path);
        return buf;
      } finally {
        closeSync(fd);
      }
    },
  };
}
