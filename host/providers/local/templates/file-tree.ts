// Whole file trees, as the template writers handle them: their size, a path resolved inside one
// as if it were `/`, copying one with everything a root filesystem holds (owners, modes, links,
// extended attributes, overlay whiteouts), and removing one without ever crossing into a mount.
import { spawn } from 'node:child_process';
import { lstatSync, readdirSync, readFileSync, readlinkSync, rmSync, type Stats } from 'node:fs';
import { constants } from 'node:os';
import { join, posix } from 'node:path';

/**
 * Bytes of the files in `root` as `du --apparent-size` counts them: regular files (each inode
 * once, so hard links count once), symlinks and directories, without following links or
 * descending into other filesystems.
 */
export function treeSizeBytes(root: string): number {
  const seen = new Set<string>();
  let total = 0;
  const rootDev = lstatSync(root).dev;
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const path = join(dir, name);
      let st: Stats;
      try {
        st = lstatSync(path);
      } catch {
        continue;
      }
      if (st.isDirectory()) {
        total += st.size;
        if (st.dev === rootDev) stack.push(path);
      } else {
        total += bytesOnce(st, seen);
      }
    }
  }
  return total;
}

/** The bytes an entry that is not a directory adds to a tree's size: its inode's once (`seen` holds the hard-linked ones counted). */
export function bytesOnce(st: Stats, seen: Set<string>): number {
  if (st.nlink <= 1) return st.size;
  const key = `${st.dev}:${st.ino}`;
  if (seen.has(key)) return 0;
  seen.add(key);
  return st.size;
}

/** Most symlinks followed resolving one path, as the kernel's own bound (ELOOP past it). */
const MAX_LINKS = 40;

/**
 * What `path` names inside the tree `root` taken as `/`: symlinks (absolute ones too) are
 * followed within the tree, never out of it. The host path, or null when it does not exist.
 */
export function resolveInTree(root: string, path: string): string | null {
  let pending = path.split('/').filter(Boolean);
  const done: string[] = [];
  let links = 0;
  while (pending.length > 0) {
    const part = pending.shift()!;
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const host = join(root, ...done, part);
    let st: Stats;
    try {
      st = lstatSync(host);
    } catch {
      return null;
    }
    if (!st.isSymbolicLink()) {
      done.push(part);
      continue;
    }
    if (++links > MAX_LINKS) return null;
    const target = readlinkSync(host);
    if (target.startsWith('/')) done.length = 0;
    pending = [...target.split('/').filter(Boolean), ...pending];
  }
  return join(root, ...done);
}

/** The mount points under `dir` (itself included) in this process's mount namespace. */
export function mountsUnder(dir: string): string[] {
  let text: string;
  try {
    text = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return [];
  }
  const prefix = posix.normalize(dir);
  // Field 5 is the mount point, with spaces, tabs, newlines and backslashes octal-escaped.
  return text
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((m): m is string => m !== undefined)
    .map((m) => m.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((m) => m === prefix || m.startsWith(prefix + '/'));
}

/**
 * Removes a tree, unless something is mounted inside it (a build's /proc or /dev bind left by a
 * killed mmdebstrap): a recursive removal would then delete through the mount, in the host's
 * own /dev. Returns false, removing nothing, in that case.
 */
export function removeTree(dir: string): boolean {
  if (mountsUnder(dir).length > 0) return false;
  rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
  return true;
}

/** Runs a program to its end; resolves with its exit status (128+signal when killed) and the tail of its stderr. */
export function runProgram(
  program: string,
  args: readonly string[],
  opts: { cwd?: string } = {},
): Promise<{ status: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, { stdio: ['ignore', 'ignore', 'pipe'], ...opts });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => (stderr = (stderr + d).slice(-4096)));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ status: code ?? 128 + (signal ? constants.signals[signal] : 0), stderr }));
  });
}

/**
 * Copies the contents of `from` into the existing directory `to` as a root filesystem needs:
 * as root with owners, modes, times, hard links, extended attributes (overlay's opaque marks,
 * file capabilities) and device nodes (overlay's whiteouts); otherwise the same but owned by
 * this user. Reflinks where the filesystem has them; never into another filesystem mounted inside.
 */
export async function copyTree(from: string, to: string): Promise<{ status: number; stderr: string }> {
  const isRoot = process.geteuid?.() === 0;
  const preserve = isRoot ? ['-a'] : ['-R', '--no-dereference', '--preserve=mode,timestamps,links,xattr'];
  // One filesystem: a directory holding mounts (a live system's /proc) is copied without them.
  return runProgram('cp', [...preserve, '--one-file-system', '--reflink=auto', '--', `${from}/.`, to]);
}
