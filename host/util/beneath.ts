// Host-side access to a tree a sandbox controls (a template sandbox's writable layer, a workspace's
// upper, a person's directory that a sandbox's changes are applied to): every path is walked one
// name at a time from a directory descriptor, and no name is ever a symlink that gets followed.
// Node has no openat(2); a descriptor's /proc/self/fd/N entry stands in for it: that magic link
// resolves to the very directory the descriptor holds (whatever has been renamed or swapped in its
// place since), and the one name after it is opened with O_NOFOLLOW. So a sandbox that swaps a
// directory for a symlink between two steps makes the walk fail, never leave the tree; and a
// directory opened once stays the same directory for everything done inside it.
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
  type Dirent,
  type Stats,
} from 'node:fs';

// (libuv opens every descriptor close-on-exec.)
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY, O_NONBLOCK } = constants;

/** Why a walk stopped: callers branch on the code, the path says where. */
export type BeneathCode =
  | 'symlink' // a name is a symlink where a directory or file was to be opened
  | 'not_directory'
  | 'not_found'
  | 'not_regular' // a file to read is a FIFO, device or socket
  | 'not_symlink' // a name to read as a symlink is not one
  | 'other_device' // the name is a mount point (another file system)
  | 'bad_name' // empty, `.`, `..` or holding `/`
  | 'permission'
  | 'io';

/** A walk that could not go on; `path` is relative to the tree's root, never a host path. */
export class BeneathError extends Error {
  constructor(
    readonly code: BeneathCode,
    readonly path: string,
    readonly errno?: string,
  ) {
    super(`${code}: ${path}${errno ? ` (${errno})` : ''}`);
    this.name = 'BeneathError';
  }
}

function codeOf(err: unknown, wanted: 'directory' | 'file' | 'symlink'): BeneathCode {
  switch ((err as NodeJS.ErrnoException).code) {
    case 'ELOOP':
      return 'symlink';
    case 'EINVAL':
      // readlink's answer for a name that is not a symlink.
      return wanted === 'symlink' ? 'not_symlink' : 'io';
    case 'ENOTDIR':
      // O_DIRECTORY|O_NOFOLLOW on a symlink says ENOTDIR on some kernels; callers lstat to tell.
      return wanted === 'directory' ? 'not_directory' : 'io';
    case 'ENOENT':
      return 'not_found';
    case 'EACCES':
    case 'EPERM':
      return 'permission';
    default:
      return 'io';
  }
}

/** True for a name that is one entry of a directory: not empty, `.`, `..`, and without `/` or NUL. */
export function isEntryName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('\0');
}

/** The names of a relative path, refusing `..`, `.`, empty names and an absolute path. */
export function entryNames(relPath: string): string[] {
  if (relPath === '' || relPath === '.') return [];
  const names = relPath.split('/');
  if (relPath.startsWith('/') || !names.every(isEntryName)) throw new BeneathError('bad_name', relPath);
  return names;
}

/**
 * A directory held open by descriptor, inside a tree walked without following symlinks. `path` is
 * its place relative to the tree's root (for messages). Close it when done (`close`, or `use`).
 */
export class BeneathDir {
  private closed = false;

  private constructor(
    /** The descriptor holding the directory. */
    readonly fd: number,
    /** Its path relative to the tree's root ('' for the root). */
    readonly path: string,
    /** The root's device, when the walk must stay on the root's file system. */
    private readonly rootDev: number | null,
  ) {}

  /**
   * Opens a tree's root, `hostPath`: a path of the host's own (its last name is not followed).
   * `sameDevice`: refuse to enter any directory on another file system (a mount point inside).
   */
  static openRoot(hostPath: string, opts: { sameDevice?: boolean } = {}): BeneathDir {
    let fd: number;
    try {
      fd = openSync(hostPath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (err) {
      throw new BeneathError(codeOf(err, 'directory'), '', (err as NodeJS.ErrnoException).code);
    }
    return new BeneathDir(fd, '', opts.sameDevice ? fstatSync(fd).dev : null);
  }

  /** Runs `fn` with this directory, then closes it whatever happens (synchronous `fn` only: see useAsync). */
  use<T>(fn: (dir: BeneathDir) => T): T {
    let result: T;
    try {
      result = fn(this);
    } finally {
      this.close();
    }
    // Closed at the first await, the descriptor number could be reused by anything: refuse loudly.
    if (typeof (result as { then?: unknown } | null)?.then === 'function')
      throw new TypeError('BeneathDir.use: fn returned a promise; use useAsync');
    return result;
  }

  /** Runs the asynchronous `fn` with this directory, then closes it once `fn` has settled. */
  async useAsync<T>(fn: (dir: BeneathDir) => Promise<T>): Promise<T> {
    try {
      return await fn(this);
    } finally {
      this.close();
    }
  }

  /** The tree-relative path of `name` inside this directory. */
  childPath(name: string): string {
    return this.path === '' ? name : `${this.path}/${name}`;
  }

  /**
   * A path naming `name` directly inside this very directory, for one system call that does not
   * follow its last name (lstat, unlink, rmdir, rename, symlink, mkdir, open with O_NOFOLLOW).
   */
  at(name: string): string {
    if (!isEntryName(name)) throw new BeneathError('bad_name', this.childPath(name));
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  /** The directory's entry names (no `.` or `..`). */
  names(): string[] {
    try {
      return readdirSync(`/proc/self/fd/${this.fd}`);
    } catch (err) {
      throw new BeneathError(codeOf(err, 'directory'), this.path, (err as NodeJS.ErrnoException).code);
    }
  }

  /** The directory's entry names as the bytes they are (a name need not be UTF-8). */
  rawNames(): Buffer[] {
    try {
      return readdirSync(`/proc/self/fd/${this.fd}`, { encoding: 'buffer' });
    } catch (err) {
      throw new BeneathError(codeOf(err, 'directory'), this.path, (err as NodeJS.ErrnoException).code);
    }
  }

  /** The target of the symlink `name` as the bytes it is (never followed). */
  readLinkRaw(name: string): Buffer {
    try {
      return readlinkSync(this.at(name), { encoding: 'buffer' });
    } catch (err) {
      throw new BeneathError(codeOf(err, 'symlink'), this.childPath(name), (err as NodeJS.ErrnoException).code);
    }
  }

  /** The directory's entries with their types as readdir gives them (a symlink is a symlink; no `.` or `..`). */
  entries(): Dirent[] {
    try {
      return readdirSync(`/proc/self/fd/${this.fd}`, { withFileTypes: true });
    } catch (err) {
      throw new BeneathError(codeOf(err, 'directory'), this.path, (err as NodeJS.ErrnoException).code);
    }
  }

  /** The status of `relPath` below here (a symlink is itself; none on the way is followed), or null when it is not there or cannot be reached. */
  lstatPath(relPath: string): Stats | null {
    const names = entryNames(relPath);
    if (names.length === 0) return this.lstatSelf();
    try {
      return this.openPath(names.slice(0, -1).join('/')).use((dir) => dir.lstat(names[names.length - 1]!));
    } catch (err) {
      if (err instanceof BeneathError) return null;
      throw err;
    }
  }

  /** The entry's own status (a symlink is itself), or null when there is none. */
  lstat(name: string): Stats | null {
    try {
      return lstatSync(this.at(name));
    } catch (err) {
      const code = codeOf(err, 'file');
      if (code === 'not_found') return null;
      throw new BeneathError(code, this.childPath(name), (err as NodeJS.ErrnoException).code);
    }
  }

  /** This directory's own status (from its descriptor). */
  lstatSelf(): Stats {
    return fstatSync(this.fd);
  }

  /** Opens the subdirectory `name`; refuses a symlink, a non-directory, and (sameDevice) a mount point. */
  openDir(name: string): BeneathDir {
    const path = this.childPath(name);
    let fd: number;
    try {
      fd = openSync(this.at(name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch (err) {
      let code = codeOf(err, 'directory');
      if (code === 'not_directory' && this.lstat(name)?.isSymbolicLink()) code = 'symlink';
      throw new BeneathError(code, path, (err as NodeJS.ErrnoException).code);
    }
    if (this.rootDev !== null && fstatSync(fd).dev !== this.rootDev) {
      closeSync(fd);
      throw new BeneathError('other_device', path);
    }
    return new BeneathDir(fd, path, this.rootDev);
  }

  /** Walks `relPath` (names separated by `/`, no `..`) from here, each name a real directory. */
  openPath(relPath: string): BeneathDir {
    let dir = this.reopen();
    try {
      for (const name of entryNames(relPath)) {
        const next = dir.openDir(name);
        dir.close();
        dir = next;
      }
    } catch (err) {
      dir.close();
      throw err;
    }
    return dir;
  }

  /** A second handle on this same directory (its own descriptor). */
  reopen(): BeneathDir {
    const fd = openSync(`/proc/self/fd/${this.fd}`, O_RDONLY | O_DIRECTORY);
    return new BeneathDir(fd, this.path, this.rootDev);
  }

  /**
   * Opens the regular file `name` to read, with its status from the descriptor. Never blocks on a
   * FIFO, never follows a symlink: anything but a regular file is refused (not_regular, symlink).
   */
  openFile(name: string): { fd: number; stats: Stats } {
    const path = this.childPath(name);
    let fd: number;
    try {
      fd = openSync(this.at(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    } catch (err) {
      throw new BeneathError(codeOf(err, 'file'), path, (err as NodeJS.ErrnoException).code);
    }
    const stats = fstatSync(fd);
    if (!stats.isFile()) {
      closeSync(fd);
      throw new BeneathError('not_regular', path);
    }
    return { fd, stats };
  }

  /** The target of the symlink `name` (as bytes read back to a string; never followed). */
  readLink(name: string): string {
    try {
      return readlinkSync(this.at(name));
    } catch (err) {
      throw new BeneathError(codeOf(err, 'symlink'), this.childPath(name), (err as NodeJS.ErrnoException).code);
    }
  }

  /** Creates the regular file `name` (it must not exist: O_EXCL, so nothing is followed) for writing. */
  createFile(name: string, mode: number): number {
    try {
      return openSync(this.at(name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
    } catch (err) {
      throw new BeneathError(codeOf(err, 'file'), this.childPath(name), (err as NodeJS.ErrnoException).code);
    }
  }

  /** Makes the directory `name` (the mode is then narrowed by the umask, as mkdir does). */
  makeDir(name: string, mode = 0o755): void {
    mkdirSync(this.at(name), { mode });
  }

  /** Makes the symlink `name` pointing at `target` (written as given, never resolved here). */
  makeSymlink(target: string, name: string): void {
    symlinkSync(target, this.at(name));
  }

  /** Removes the entry `name`: a directory (empty) with rmdir, anything else with unlink; a symlink itself. */
  remove(name: string): void {
    const st = this.lstat(name);
    if (!st) return;
    if (st.isDirectory()) rmdirSync(this.at(name));
    else unlinkSync(this.at(name));
  }

  /** Renames `from` to `to`, both in this directory (neither name is followed). */
  rename(from: string, to: string): void {
    renameSync(this.at(from), this.at(to));
  }

  /** Closes the descriptor (once). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
  }
}
