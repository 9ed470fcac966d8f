// A build of an earlier revision of this repository (a server, keeper and agent from before a
// change), made from git history the way the benchmarks' SANDBOX_MCP_BENCH_BASELINE is: `git
// archive` of the revision beside links to this checkout's node_modules, then its own build. Kept
// in the temp directory by revision and checkout (its links lead into this checkout: one made by
// another checkout, since removed, would have dangling ones), under a prefix of its own so
// readable-build.ts's sweeper of its copies never takes it; a second test file reuses it. Needs the
// repository's git history (a prerequisite: a failure with its fix, never a skip).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from './paths.js';

/**
 * The last revision of main before sandboxes had a resident agent (issue 21): its keeper starts
 * none, and its agent speaks protocol 1.3.
 */
export const BEFORE_RESIDENT = '8f4fff6';

/**
 * The last revision of main before the resident took `run_as` (protocol minor 9): its template
 * sandboxes have a resident of minor 8, and an image's user is honoured through the entry helper
 * and per-call agents.
 */
export const BEFORE_RUN_AS = 'bf92ebe';

/**
 * The last revision of main before the resident took `remove_file` (protocol minor 10): its
 * sandboxes have a resident of minor 9, and run_code's command removes its file itself (a trap).
 */
export const BEFORE_REMOVE_FILE = 'e0e7799';

/** The dist/ directory of a build of `revision` (built on first use). */
export function olderBuild(revision: string = BEFORE_RESIDENT): string {
  const checkout = createHash('sha256').update(REPO).digest('hex').slice(0, 12);
  const root = join(tmpdir(), `sandbox-mcp-older-${revision}-${checkout}`);
  const dist = join(root, 'dist');
  if (existsSync(join(dist, 'host.js')) && existsSync(join(dist, 'keeper.js'))) return dist;
  let archive: Buffer;
  try {
    archive = execFileSync('git', ['-C', REPO, 'archive', '--format=tar', revision], { maxBuffer: 256 * 1024 * 1024 });
  } catch {
    throw new Error(`revision ${revision} of this repository is needed (git history: a full clone, not a shallow one)`);
  }
  const building = `${root}.${process.pid}.tmp`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(join(building, 'node_modules'), { recursive: true });
  execFileSync('tar', ['-x', '-C', building], { input: archive });
  for (const name of readdirSync(join(REPO, 'node_modules')))
    symlinkSync(join(REPO, 'node_modules', name), join(building, 'node_modules', name));
  execFileSync(process.execPath, [join(building, 'build', 'build.mjs')], { cwd: building, stdio: 'ignore' });
  // Another test file may have built it meanwhile: either whole build will do.
  try {
    renameSync(building, root);
  } catch {
    rmSync(building, { recursive: true, force: true });
  }
  return dist;
}
