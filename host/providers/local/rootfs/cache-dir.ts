// Where the local provider keeps what it derives from this host for its sandboxes — the agent's
// runtime (agent-runtime.ts) and the base template's /etc (base-view.ts): in the user's cache
// directory, so that every state directory of the user shares one copy, else in the state directory.
// Sandboxes see these files: the directory must be this user's alone, like the state directory. A
// root server's bwrap runs as each sandbox's own uid and reaches what it binds by path, so a root
// server keeps them in /var/cache/sandbox-mcp, which others may search (0711) but not list or write.
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, renameSync, rmSync, utimesSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

/** A root server's cache (see the module comment). */
export const ROOT_CACHE_DIR = '/var/cache/sandbox-mcp';

/** True when `dir` is a directory of this user that nobody else may write (made with `mode` when missing). */
function isPrivateDir(dir: string, mode: number): boolean {
  try {
    mkdirSync(dir, { recursive: true, mode });
    const st = lstatSync(dir);
    return st.isDirectory() && st.uid === (process.geteuid?.() ?? 0) && (st.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/**
 * `$XDG_CACHE_HOME/sandbox-mcp`, else `~/.cache/sandbox-mcp`, when it is (or can be made) a private
 * directory of this user; else `cache` in the state directory (which is checked to be private).
 */
export function hostCacheDir(stateDir: string, isRoot: boolean, env: NodeJS.ProcessEnv = process.env): string {
  if (isRoot && isPrivateDir(ROOT_CACHE_DIR, 0o711)) {
    chmodSync(ROOT_CACHE_DIR, 0o711);
    return ROOT_CACHE_DIR;
  }
  const base = env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME) ? env.XDG_CACHE_HOME : join(env.HOME || homedir(), '.cache');
  const shared = join(base, 'sandbox-mcp');
  if (isAbsolute(shared) && isPrivateDir(shared, 0o700)) return shared;
  const own = join(stateDir, 'cache');
  mkdirSync(own, { recursive: true, mode: 0o700 });
  return own;
}

/**
 * The directory `<parent>/<key>`, made by `fill` (given an empty directory) the first time and
 * kept: whoever renames a complete copy into place first wins, so a reader never sees a partial one
 * and concurrent servers may race. Its mtime says when it was last handed out (cache-prune.ts
 * removes one unused for a day). Returns its path.
 */
export function cachedDir(parent: string, key: string, fill: (dir: string) => void): string {
  const dir = join(parent, key);
  if (isHandedOut(dir)) return dir;
  // Searchable, not listable: see the module comment.
  mkdirSync(parent, { recursive: true, mode: 0o711 });
  const tmp = join(parent, `.tmp-${key}-${randomBytes(4).toString('hex')}`);
  mkdirSync(tmp, { mode: 0o700 });
  try {
    fill(tmp);
    chmodSync(tmp, 0o755);
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    // Another server put its copy in place first.
    if (existsSync(dir)) return dir;
    throw e;
  }
  return dir;
}

/** Sets the mtime of `dir` to now when it is there (a prune renaming it away meanwhile sees the change); false when it is not. */
function isHandedOut(dir: string): boolean {
  try {
    const now = new Date();
    utimesSync(dir, now, now);
    return true;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return false;
    // One this user may not touch (a read-only file system): used as it is.
    return existsSync(dir);
  }
}

/** Removes what cachedDir left half-made when a process died in `fill` (or a prune half-removed), once it is older than `minAgeMs`. */
export function removeStaleTemporaries(parent: string, minAgeMs = 10 * 60_000): void {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith('.tmp-')) continue;
    try {
      if (Date.now() - lstatSync(join(parent, name)).mtimeMs > minAgeMs) rmSync(join(parent, name), { recursive: true, force: true });
    } catch {
      // Gone meanwhile.
    }
  }
}
