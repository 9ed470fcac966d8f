// What a workspace's host directory was at create, as far as the person's `apply` needs it, kept
// without copying or hashing anything: create stays as fast as without a workspace.
//   - `sinceNs`: the kernel stamps every change of a file — a write, chmod, rename, a new link —
//     with the current time as its ctime, which no user can set back. So a host file whose ctime is
//     not before the create's own instant changed since (or may have: a change in the same clock
//     tick counts too). The instant is the ctime of a file written for it, from the same clock.
//   - the names each directory held (a readdir walk, no stat): whether a path now missing existed
//     at create (the host deleted it since) or not (the sandbox added it). Without them (an e2b
//     copy says it by the change itself, or past the walk's bound), a missing path counts as changed
//     when its nearest directory on the host changed.
//   - the git repository the directory lies in and the commit HEAD named, for `apply`'s branch.
// The content at create is not kept: a host file changed since is flagged, never diffed against.
import { execFile } from 'node:child_process';
import { chmodSync, lstatSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { BeneathDir, BeneathError } from '../util/beneath.js';
import type { WorkspaceGit, WorkspaceOrigin } from './provider.js';

/** The most names the walk at create records; past them, what it did not reach falls back to ctimes. */
export const MAX_RECORDED_NAMES = 200_000;

/** The names each directory of a workspace held at create, by `/`-separated relative path ('' is the top). */
export interface WorkspaceNames {
  dirs: Record<string, string[]>;
  /** False when the walk stopped at MAX_RECORDED_NAMES or could not read a directory (those are absent). */
  isComplete: boolean;
}

/**
 * The instant a change must not precede to count as "since now": the ctime of a file in `dir`
 * changed now. Its ctime is looked at before the change, so a kernel with multigrain timestamps
 * (Linux 6.13+) stamps the change finely and makes every later change's ctime at least that: a
 * file written earlier in the same clock tick then reads as before it (measured), where a coarse
 * clock alone would make it look changed since.
 */
export function ctimeNow(dir: string): bigint {
  const probe = join(dir, `.since-${randomBytes(6).toString('hex')}`);
  writeFileSync(probe, '', { mode: 0o600 });
  try {
    lstatSync(probe);
    chmodSync(probe, 0o400);
    return lstatSync(probe, { bigint: true }).ctimeNs;
  } finally {
    rmSync(probe, { force: true });
  }
}

/**
 * The names below `root`, directory by directory (`.git` and what it holds left out, as in the
 * changes). Walked from directory descriptors: a directory swapped for a symlink meanwhile is not
 * entered (it counts as unreadable), so nothing outside `root` is listed.
 */
export function recordNames(root: string, maxNames = MAX_RECORDED_NAMES): WorkspaceNames {
  let top: BeneathDir;
  try {
    top = BeneathDir.openRoot(root);
  } catch {
    return { dirs: {}, isComplete: false };
  }
  return top.use((dir) => recordNamesBelow(dir, maxNames));
}

function recordNamesBelow(top: BeneathDir, maxNames: number): WorkspaceNames {
  const dirs: Record<string, string[]> = {};
  const stack = [''];
  let count = 0;
  let isComplete = true;
  while (stack.length > 0) {
    const rel = stack.pop()!;
    let entries;
    try {
      entries = top.openPath(rel).use((dir) => dir.entries());
    } catch {
      isComplete = false;
      continue;
    }
    if (count + entries.length > maxNames) return { dirs, isComplete: false };
    count += entries.length;
    dirs[rel] = entries.map((e) => e.name);
    for (const e of entries) if (e.isDirectory() && e.name !== '.git') stack.push(rel === '' ? e.name : `${rel}/${e.name}`);
  }
  return { dirs, isComplete };
}

function git(args: readonly string[], cwd: string): Promise<string | null> {
  return new Promise((resolve) => {
    // The person's repository may belong to another user than the server's (a root server):
    // safe.directory on the command line lets git read it without trusting it any further.
    execFile(
      'git',
      ['-c', 'safe.directory=*', ...args],
      { cwd, timeout: 10_000, env: { ...process.env, GIT_OPTIONAL_LOCKS: '0' } },
      (err, stdout) => resolve(err ? null : stdout),
    );
  });
}

/** The repository `dir` lies in and HEAD's commit, or undefined when it lies in none (or git is missing). */
export async function findGit(dir: string): Promise<WorkspaceGit | undefined> {
  const where = await git(['rev-parse', '--show-toplevel', '--show-prefix'], dir);
  if (where === null) return undefined;
  const [top, prefix = ''] = where.split('\n');
  if (!top) return undefined;
  const head = await git(['rev-parse', '-q', '--verify', 'HEAD^{commit}'], dir);
  let realTop = top;
  try {
    realTop = realpathSync(top);
  } catch {
    // As git gave it.
  }
  return { top: realTop, prefix, head: head?.trim() || null };
}

/** The origin of a workspace made from `hostPath` now (`probeDir`: a directory of the server's own to stamp the instant in). */
export async function captureOrigin(hostPath: string, probeDir: string): Promise<WorkspaceOrigin> {
  const sinceNs = ctimeNow(probeDir);
  const repo = await findGit(hostPath);
  return repo ? { sinceNs: String(sinceNs), git: repo } : { sinceNs: String(sinceNs) };
}

const NS_PER_S = 1_000_000_000n;

/**
 * True when a ctime is not before `sinceNs`. A filesystem that keeps whole seconds (a ctime with no
 * nanoseconds) is compared by the second: a change in the second of the create counts as after it.
 */
export function isNotBefore(ctimeNs: bigint, sinceNs: bigint): boolean {
  if (ctimeNs % NS_PER_S === 0n) return ctimeNs / NS_PER_S >= sinceNs / NS_PER_S;
  return ctimeNs >= sinceNs;
}

/** The ctime of `rel` below the open root (never through a symlink), or null when it is not there. */
function ctimeOf(root: BeneathDir, rel: string): bigint | null {
  try {
    const names = rel === '' ? [] : rel.split('/');
    if (names.length === 0) return lstatSync(`/proc/self/fd/${root.fd}`, { bigint: true }).ctimeNs;
    return root.openPath(names.slice(0, -1).join('/')).use((dir) => lstatSync(dir.at(names[names.length - 1]!), { bigint: true }).ctimeNs);
  } catch (err) {
    if (err instanceof BeneathError || (err as NodeJS.ErrnoException).code !== undefined) return null;
    throw err;
  }
}

/**
 * One changed path as the check needs it. `existedAtCreate`: when the change itself says (an e2b
 * copy is the tree at create, so an addition there was absent then); `isDeletion`: the sandbox
 * deleted it, so a host that deleted it too agrees.
 */
export interface ChangedPath {
  path: string;
  existedAtCreate?: boolean;
  isDeletion?: boolean;
}

/**
 * The paths of `changes` whose host file changed since create: present now with a ctime not before
 * it; or missing now but there at create (the host deleted it; no conflict with a deletion); or
 * missing, with nothing known of create, in a directory that changed since. Every path is
 * walked from the directory's descriptor, never through a symlink: a path below a host symlink is
 * not there.
 */
export function hostChangedPaths(
  hostPath: string,
  origin: WorkspaceOrigin,
  changes: readonly ChangedPath[],
  names?: WorkspaceNames,
): Set<string> {
  let root: BeneathDir;
  try {
    root = BeneathDir.openRoot(hostPath);
  } catch {
    // The directory itself is gone or replaced: every path changed on the host.
    return new Set(changes.map((c) => c.path));
  }
  return root.use((dir) => changedBelow(dir, origin, changes, names));
}

function changedBelow(root: BeneathDir, origin: WorkspaceOrigin, changes: readonly ChangedPath[], names?: WorkspaceNames): Set<string> {
  const since = BigInt(origin.sinceNs);
  const changed = new Set<string>();
  for (const c of changes) {
    const ctime = ctimeOf(root, c.path);
    if (ctime !== null) {
      if (isNotBefore(ctime, since)) changed.add(c.path);
      continue;
    }
    if (c.isDeletion) continue;
    const parent = dirname(c.path) === '.' ? '' : dirname(c.path);
    const existed = c.existedAtCreate ?? existedInNames(names, parent, c.path);
    if (existed !== undefined) {
      if (existed) changed.add(c.path);
      continue;
    }
    // Nothing known of create: the nearest directory that exists now decides.
    for (let dir = parent; ; dir = dirname(dir) === '.' ? '' : dirname(dir)) {
      const dirCtime = ctimeOf(root, dir);
      if (dirCtime !== null) {
        if (isNotBefore(dirCtime, since)) changed.add(c.path);
        break;
      }
      if (dir === '') break;
    }
  }
  return changed;
}

/** Whether the walk at create saw `path` (in directory `parent`); undefined when it cannot tell. */
function existedInNames(names: WorkspaceNames | undefined, parent: string, path: string): boolean | undefined {
  if (!names) return undefined;
  const recorded = names.dirs[parent];
  if (recorded) return recorded.includes(parent === '' ? path : path.slice(parent.length + 1));
  // A complete walk records every directory there was: one it lacks did not exist (or was no directory).
  return names.isComplete ? false : undefined;
}

/** The names recorded in `file` (see recordNames), or undefined when it cannot be read as such. */
export function readNames(file: string): WorkspaceNames | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as WorkspaceNames;
    return parsed && typeof parsed.dirs === 'object' && typeof parsed.isComplete === 'boolean' ? parsed : undefined;
  } catch {
    return undefined;
  }
}
