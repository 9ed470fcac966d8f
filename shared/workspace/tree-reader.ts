// How the workspace computation reads a tree: one small interface, so the same comparison runs
// inside the sandbox over plain paths (the agent) and on the host, where every name is opened
// without following a symlink (host/util/beneath-tree.ts) or the content is what the host
// downloaded (an e2b sandbox's nominated files). Paths are relative to the tree's root,
// `/`-separated ('' is the root).
import { closeSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import type { WorkspaceEntryKind } from './contract.js';

/** What a path is: its kind and the status the comparison uses. */
export interface TreeEntry {
  kind: WorkspaceEntryKind | 'other';
  /** Permission bits. */
  mode: number;
  size: number;
  mtimeMs: number;
  /** An overlay's whiteout (a 0/0 character device). */
  isWhiteout: boolean;
}

/** A file open to read from its start. */
export interface TreeFile {
  /** Reads into `buf` from where the last read stopped; 0 at the end. */
  read(buf: Buffer, offset: number, length: number): number;
  close(): void;
}

/** Read access to one tree; every method answers "nothing" (null, []) where the path cannot be read. */
export interface TreeReader {
  lstat(rel: string): TreeEntry | null;
  names(rel: string): string[];
  readLink(rel: string): string | null;
  /** A regular file's content; null for anything else or an unreadable file. */
  open(rel: string): TreeFile | null;
}

/** The trees a comparison reads: see changes.ts. */
export interface TreeReaders {
  base: TreeReader;
  current: TreeReader;
  upper?: TreeReader;
}

/** The entry a status describes. */
export function entryOf(st: Stats): TreeEntry {
  const kind = st.isFile() ? 'file' : st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : 'other';
  return { kind, mode: st.mode & 0o7777, size: st.size, mtimeMs: st.mtimeMs, isWhiteout: st.isCharacterDevice() && st.rdev === 0 };
}

/** A file descriptor as a TreeFile (closing it closes the descriptor). */
export function fdFile(fd: number): TreeFile {
  return {
    read: (buf, offset, length) => readSync(fd, buf, offset, length, null),
    close: () => closeSync(fd),
  };
}

/** A tree read by plain paths below `root` (inside a sandbox, whose own rights bound what it reads). */
export function pathTreeReader(root: string): TreeReader {
  return {
    lstat(rel) {
      try {
        return entryOf(lstatSync(join(root, rel)));
      } catch {
        return null;
      }
    },
    names(rel) {
      try {
        return readdirSync(join(root, rel));
      } catch {
        return [];
      }
    },
    readLink(rel) {
      try {
        return readlinkSync(join(root, rel));
      } catch {
        return null;
      }
    },
    open(rel) {
      try {
        return fdFile(openSync(join(root, rel), 'r'));
      } catch {
        return null;
      }
    },
  };
}

/** Reads until `buf` is full or the file ends; returns the bytes read. */
export function readFull(file: TreeFile, buf: Buffer): number {
  let n = 0;
  while (n < buf.length) {
    const got = file.read(buf, n, buf.length - n);
    if (got === 0) break;
    n += got;
  }
  return n;
}

/** A file's first `maxBytes + 1` bytes at most (so a caller sees when it is larger), or null when it cannot be read. */
export function readUpTo(reader: TreeReader, rel: string, maxBytes: number): Buffer | null {
  const file = reader.open(rel);
  if (!file) return null;
  try {
    // Unzeroed: only the bytes read are returned (zeroing 1 MiB per side per file was most of a diff's CPU).
    const buf = Buffer.allocUnsafe(maxBytes + 1);
    return buf.subarray(0, readFull(file, buf));
  } catch {
    return null;
  } finally {
    file.close();
  }
}
