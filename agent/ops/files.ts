// read_file, write_file and list_files (minor 7, resident only): what the local provider's file
// scripts (host/providers/local/files/scripts.ts) do, in the resident with node's fs — the same
// tests (stat, lstat, access) in the same order and the same outcomes, as the sandbox user in the
// sandbox's own view, with no process started. Each answer is an outcome of FILE_FAILURES or the
// data; an error the scripts do not map (an I/O error mid-read) is `internal`, as their other exit
// statuses are. Nothing here blocks on a FIFO: every open is O_NONBLOCK, and what was opened is
// checked to be a regular file on its descriptor before a byte moves.
import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  opendirSync,
  openSync,
  readSync,
  statSync,
  writeSync,
  type Stats,
} from 'node:fs';
import {
  FILE_LISTING_MAX_BYTES,
  type FileFailure,
  type FileListAnswer,
  type FileReadAnswer,
  type FileWriteAnswer,
} from '../../shared/protocol.js';

/** Room beyond a file's size when reading it to its end. */
const READ_SLACK_BYTES = 8192;

const { O_RDONLY, O_RDWR, O_WRONLY, O_CREAT, O_APPEND, O_TRUNC, O_NONBLOCK, O_NOCTTY, R_OK, W_OK, X_OK } = constants;

/** Ends an operation with one of FILE_FAILURES. */
class FileOutcome extends Error {
  constructor(readonly status: FileFailure) {
    super(status);
  }
}

const fail = (status: FileFailure): never => {
  throw new FileOutcome(status);
};

/** `test -e`/`-d`/`-f`: stat (symlinks followed); null for any error. */
function statOf(p: string): Stats | null {
  try {
    return statSync(p);
  } catch {
    return null;
  }
}

/** `test -L`. */
function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** `test -r`/`-w`/`-x`: access(2) as the sandbox user. */
function may(p: string, mode: number): boolean {
  try {
    accessSync(p, mode);
    return true;
  } catch {
    return false;
  }
}

/** The scripts' `parent`: trailing slashes go, then the last name ('/' for a name under the root, '.' for none). */
export function parentOf(path: string): string {
  let r = path;
  while (r !== '/' && r.endsWith('/')) r = r.slice(0, -1);
  const slash = r.lastIndexOf('/');
  if (slash < 0) return '.';
  return slash === 0 ? '/' : r.slice(0, slash);
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // closed, or never to be used again
  }
}

async function asOutcome<T>(op: () => T): Promise<T | { status: FileFailure }> {
  try {
    return op();
  } catch (e) {
    if (e instanceof FileOutcome) return { status: e.status };
    throw e;
  }
}

/** READ_SCRIPT: at most `length` bytes from `offset` (fewer at the end), with the file's size. */
export function readFileOp(p: string, offset: number, length: number): Promise<FileReadAnswer> {
  return asOutcome(() => {
    const st = statOf(p);
    if (!st) fail('not_found');
    if (st!.isDirectory()) fail('is_directory');
    if (!st!.isFile()) fail('not_regular');
    if (!may(p, R_OK)) fail('permission');
    let fd: number;
    try {
      // Read-only and non-blocking: a FIFO swapped in after the tests above never blocks the open.
      fd = openSync(p, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    } catch {
      return fail(statOf(p) ? 'permission' : 'not_found');
    }
    try {
      const opened = fstatSync(fd);
      if (!opened.isFile()) fail('not_regular');
      // To the end as it is when read (as tail reads it: a file may grow, and /proc's say size 0).
      let data = Buffer.allocUnsafe(Math.min(length, Math.max(opened.size - offset, 0) + READ_SLACK_BYTES));
      let got = 0;
      while (got < length) {
        if (got === data.length) data = Buffer.concat([data, Buffer.allocUnsafe(Math.min(data.length, length - got))]);
        const n = readSync(fd, data, got, data.length - got, offset + got);
        if (n === 0) break;
        got += n;
      }
      return { status: 'ok' as const, size: opened.size, data_b64: data.toString('base64', 0, got) };
    } finally {
      closeQuietly(fd);
    }
  });
}

/** WRITE_SCRIPT: writes (or appends) `data`, creating the parent directories; the file's size after. */
export function writeFileOp(p: string, data: Buffer, append: boolean): Promise<FileWriteAnswer> {
  return asOutcome(() => {
    const d = parentOf(p);
    if (!statOf(d)?.isDirectory()) {
      try {
        mkdirSync(d, { recursive: true });
      } catch {
        let e = d;
        while (!statOf(e) && !isLink(e) && e !== '/' && e !== '.') e = parentOf(e);
        fail(statOf(e)?.isDirectory() ? 'permission' : 'not_directory');
      }
    }
    const st = statOf(p);
    if (st?.isDirectory()) fail('is_directory');
    if (st && !st.isFile()) fail('not_regular');
    if (st && !may(p, W_OK)) fail('permission');
    if (!st && !may(d, W_OK)) fail('permission');
    let fd: number | undefined;
    try {
      fd = openSync(p, O_RDWR | O_CREAT | O_NONBLOCK | O_NOCTTY, 0o666);
    } catch {
      // A file the sandbox user may write but not read: opened for appending (after the same checks).
      if (statOf(p)?.isFile() && may(p, W_OK) && !may(p, R_OK)) {
        try {
          fd = openSync(p, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY, 0o666);
        } catch {
          fd = undefined;
        }
      }
      if (fd === undefined) {
        // A dangling symlink whose target directory does not exist (in the sandbox's view).
        if (isLink(p) && !statOf(p)) fail('not_found');
        const now = statOf(p);
        if (now && !now.isFile()) fail('not_regular');
        if (!may(d, W_OK)) fail('permission');
        fail('no_space');
      }
    }
    const opened = fd!;
    try {
      if (!fstatSync(opened).isFile()) fail('not_regular');
      // As the script's `cat > /proc/self/fd/5` (or `>>`): the very file checked, opened again to
      // write, truncated unless appending. Non-blocking here too: a lease a process inside took
      // meanwhile fails the open (EWOULDBLOCK) instead of holding the resident until it is broken.
      const self = `/proc/self/fd/${opened}`;
      let out: number | undefined;
      try {
        out = openSync(self, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | (append ? O_APPEND : O_TRUNC), 0o666);
        for (let done = 0; done < data.length;) done += writeSync(out, data, done, data.length - done);
      } catch {
        fail(may(self, W_OK) ? 'no_space' : 'permission');
      } finally {
        if (out !== undefined) closeQuietly(out);
      }
      return { status: 'ok' as const, size: fstatSync(opened).size };
    } finally {
      closeQuietly(opened);
    }
  });
}

/** find's %y letters, by lstat. */
function typeLetter(st: {
  isFile(): boolean;
  isDirectory(): boolean;
  isSymbolicLink(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
}): string {
  if (st.isFile()) return 'f';
  if (st.isDirectory()) return 'd';
  if (st.isSymbolicLink()) return 'l';
  if (st.isFIFO()) return 'p';
  if (st.isSocket()) return 's';
  if (st.isCharacterDevice()) return 'c';
  if (st.isBlockDevice()) return 'b';
  return 'U';
}

const NS_PER_S = 1_000_000_000n;

/** find's %T@: whole seconds (rounded down, as a timespec has them), a point, nine digits of nanoseconds and a 0. */
export function findSeconds(ns: bigint): string {
  let s = ns / NS_PER_S;
  if (ns < 0n && s * NS_PER_S !== ns) s -= 1n;
  return `${s}.${String(ns - s * NS_PER_S).padStart(9, '0')}0`;
}

const SLASH = Buffer.from('/');

/**
 * LIST_SCRIPT: breadth first, level by level, each level in the order `find -H p -mindepth i
 * -maxdepth i` prints it (directories in their own order, not sorted), the first `maxEntries`
 * records kept; `too_large` past FILE_LISTING_MAX_BYTES.
 */
export function listFilesOp(p: string, depth: number, maxEntries: number): Promise<FileListAnswer> {
  return asOutcome((): FileListAnswer => {
    const st = statOf(p);
    if (!st) fail('not_found');
    if (!st!.isDirectory()) fail('not_directory');
    if (!may(p, R_OK) || !may(p, X_OK)) fail('permission');
    const records: Buffer[] = [];
    let bytes = 0;
    let level: Buffer[] = [Buffer.from(p)];
    for (let i = 1; i <= depth && level.length > 0; i++) {
      const next: Buffer[] = [];
      for (const dir of level) {
        let handle;
        try {
          // Names as bytes (node's types know only text encodings here; its runtime takes 'buffer').
          handle = opendirSync(dir, { encoding: 'buffer' as BufferEncoding });
        } catch {
          continue; // find says why on stderr, which the script drops, and goes on
        }
        try {
          for (;;) {
            let entry;
            try {
              entry = handle.readSync();
            } catch {
              break;
            }
            if (!entry) break;
            const name = entry.name as unknown as Buffer;
            const path = dir.length === 1 && dir[0] === SLASH[0] ? Buffer.concat([SLASH, name]) : Buffer.concat([dir, SLASH, name]);
            let ls;
            try {
              ls = lstatSync(path, { bigint: true });
            } catch {
              continue;
            }
            const record = Buffer.concat([
              Buffer.from(`${typeLetter(ls)}\t${ls.size}\t${findSeconds(ls.mtimeNs)}\t`),
              path,
              Buffer.from([0]),
            ]);
            bytes += record.length;
            if (bytes > FILE_LISTING_MAX_BYTES) return { status: 'too_large' };
            records.push(record);
            if (records.length >= maxEntries) return { status: 'ok', listing_b64: Buffer.concat(records).toString('base64') };
            if (i < depth && ls.isDirectory()) next.push(path);
          }
        } finally {
          try {
            handle.closeSync();
          } catch {
            // already closed
          }
        }
      }
      level = next;
    }
    return { status: 'ok', listing_b64: Buffer.concat(records).toString('base64') };
  });
}
