// The head of dist/agent.cjs: compiles the agent itself (agent/main.ts's bundle, which follows as a
// string constant, __AGENT_BODY__) with V8's code cache, so that a node process of the agent reads
// the code an earlier one compiled instead of compiling it again (about a fifth of `call get`'s
// time on Node 20: build/build.mjs, docs/performance.md). Node 22+ has a compile cache of its own
// (NODE_COMPILE_CACHE), but only where it is set, and none on Node 20.
//
// The cache is the agent's own: one file per agent build, node and V8 version, architecture and
// V8 flags, in the agent's private state folder (0700, its own; never read from a folder that is
// not), written by an agent process that found none, read by the next. Whoever could write it can
// already write the agent's file itself (installed in the same user's home), and V8 checks a
// cache against its own version and flags and refuses one that does not match: the agent then
// compiles as it would without one. Nothing leaves the sandbox.
import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statfsSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { debug } from './errors.js';
import { isOwnPrivateDir, stateDir } from './paths.js';

declare const __AGENT_BODY__: string;
declare const __AGENT_BODY_SHA256__: string;

/** The folder of the cache, in the agent's state folder. */
const CACHE_DIR = 'code-cache';

/**
 * Written only where the state folder's filesystem has this much free: the folder is a small mount
 * of its own in a local sandbox (a sixteenth of the disk budget), there for the tasks' logs, and a
 * cache takes 0.1-0.5 MiB a mode.
 */
const CACHE_MIN_FREE_BYTES = 32 * 1024 * 1024;

/** The largest cache read (V8's of this agent: 0.1-0.5 MiB). */
const CACHE_MAX_BYTES = 16 * 1024 * 1024;

/** The agent's modes (agent/main.ts), each with a cache of its own. */
const MODES = ['call', 'supervise', 'serve', 'selftest'] as const;

/** FNV-1a of `text`, as 8 hex digits: a name part for the V8 flags (node's crypto costs a get 10 ms to load). */
function shortHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, '0');
}

/** The cache file of this agent build and mode on this node with these flags, or null without a state folder. */
function cacheFile(): { dir: string; file: string } | null {
  let dir: string;
  try {
    dir = join(stateDir(), CACHE_DIR);
  } catch {
    return null;
  }
  const flags = shortHash(`${process.execArgv.join('\0')}\0${process.env.NODE_OPTIONS ?? ''}`);
  // One per mode: the cache holds what the process that wrote it compiled, and a supervisor runs other code than a call.
  const mode = MODES.find((m) => m === process.argv[2]) ?? 'other';
  const name = `${__AGENT_BODY_SHA256__.slice(0, 16)}-${mode}-${process.version}-${process.versions.v8}-${process.arch}-${flags}.bin`;
  return { dir, file: join(dir, name) };
}

/** The cache's bytes, when the folder is this user's own and private and holds one: a regular file, not too large, never through a symlink. */
function readCache(dir: string, file: string): Buffer | undefined {
  if (!isOwnPrivateDir(dir)) return undefined;
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > CACHE_MAX_BYTES) return undefined;
    return readFileSync(fd);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** Writes the cache `data()` makes (beside it, then renamed), removing the caches of other builds; never throws. */
function writeCache(dir: string, file: string, data: () => Buffer): void {
  try {
    // Only in a state folder that is there already (the first start makes it), never a folder of another's.
    if (!isOwnPrivateDir(dir)) mkdirSync(dir, { mode: 0o700 });
    if (!isOwnPrivateDir(dir)) return;
    const fs = statfsSync(dir);
    if (fs.bavail * fs.bsize < CACHE_MIN_FREE_BYTES) return;
    const build = __AGENT_BODY_SHA256__.slice(0, 16);
    for (const name of readdirSync(dir)) if (!name.startsWith(build)) rmSync(join(dir, name), { force: true });
    const temporary = `${file}.${process.pid}.tmp`;
    try {
      writeFileSync(temporary, data(), { mode: 0o600 });
      renameSync(temporary, file);
    } finally {
      rmSync(temporary, { force: true }); // a write cut short by a full disk leaves nothing
    }
  } catch {
    // No state folder yet, no room, or not ours: the next agent compiles as this one did.
  }
}

// This file's module (`module` and `exports` would make esbuild treat this file as CommonJS).
const self = require.cache[__filename]!;
const cache = cacheFile();
const cachedData = cache ? readCache(cache.dir, cache.file) : undefined;
// The bundle is already wrapped as a CommonJS module's function (build/build.mjs): compiled as it is, no copy.
const script = new Script(__AGENT_BODY__, {
  filename: __filename,
  ...(cachedData ? { cachedData } : {}),
});
debug(
  `code cache: ${!cache ? 'none (no state folder)' : cachedData === undefined ? 'absent' : script.cachedDataRejected ? 'refused' : 'used'}`,
);
if (cache && (cachedData === undefined || script.cachedDataRejected)) {
  // At exit: the cache then holds the functions this process compiled, not only the top level.
  process.once('exit', () => writeCache(cache.dir, cache.file, () => script.createCachedData()));
}
(script.runInThisContext() as (...args: unknown[]) => void)(self.exports, require, self, __filename, __dirname);
