// vitest's global setup: one temporary folder for the whole run, and the guard that nothing is
// left in it. Workers are forked after this runs, so TMPDIR reaches them, and through them the
// servers, keepers, CLIs and browsers they start with the test's environment: every tmpdir() of
// the run lands here. At the end whatever is still in the folder (but the builds kept for the
// whole run, below) is a leak — a test that does not remove its scratch (scratch.ts), or a server
// that leaves temporary files on some path — and fails the run, naming it; the folder is removed
// either way, so no run leaves anything in the machine's /tmp. A run killed before its teardown
// leaves its folder: the next run removes it (named after the run's pid, once that pid is gone).
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { isRunning } from './processes.js';

/**
 * What the run keeps on purpose until its end: builds shared by test files (older-build.ts: a
 * revision's build; readable-build.ts: a copy of dist/ another user can read, one per worker);
 * Node's compile cache, which npm (run by the install tests) turns on in the temporary folder
 * on Node 22 and later.
 */
const RUN_CACHES = [/^sandbox-mcp-older-[0-9a-f]+-[0-9a-f]+$/, /^sandbox-mcp-build-\d+-[A-Za-z0-9]{6}$/, /^node-compile-cache$/];

const PREFIX = 'sandbox-mcp-tests-';

/** How long a leftover may take to go: a process a test stopped may still be removing its own files. */
const SETTLE_MS = 3000;

/** The entries of `root` that are not the run's caches, each as `name (owner uid, kind)`. */
function leftovers(root: string): string[] {
  const left: string[] = [];
  for (const name of readdirSync(root)) {
    if (RUN_CACHES.some((re) => re.test(name))) continue;
    try {
      const st = lstatSync(join(root, name));
      left.push(`${name} (uid ${st.uid}, ${st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other'})`);
    } catch {
      // Removed meanwhile.
    }
  }
  return left.sort();
}

export default function setup(project: TestProject): () => Promise<void> {
  // The benchmarks (vitest bench) are measured, not checked: what they leave is only named.
  const isGuarded = project.vitest.mode === 'test';
  removeFoldersOfKilledRuns();
  const root = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  // As /tmp is: a server a test runs as another user (nobody) makes its own temporary files here.
  chmodSync(root, 0o1777);
  process.env.TMPDIR = root;
  return async () => {
    let left = leftovers(root);
    for (const until = Date.now() + SETTLE_MS; left.length > 0 && Date.now() < until; left = leftovers(root))
      await new Promise((r) => setTimeout(r, 100));
    if (left.length > 0) {
      if (isGuarded) process.exitCode = 1;
      process.stderr.write(
        `\n${isGuarded ? 'FAIL' : 'note'}: the run left ${left.length} entr${left.length === 1 ? 'y' : 'ies'} in its temporary folder ${root} ` +
          `(a test or a server it ran made them and did not remove them; test/support/scratch.ts):\n` +
          left.map((l) => `  ${l}\n`).join(''),
      );
    }
    try {
      rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      // A mount a test left behind, say: the rest is gone.
      if (isGuarded) process.exitCode = 1;
      process.stderr.write(
        `${isGuarded ? 'FAIL' : 'note'}: could not remove the run's temporary folder ${root}: ${(err as Error).message}\n`,
      );
    }
  };
}

/** Removes the folders of runs (of this user) whose vitest no longer runs: killed before their teardown. */
function removeFoldersOfKilledRuns(): void {
  const uid = process.getuid?.();
  for (const name of readdirSync(tmpdir())) {
    const pid = new RegExp(`^${PREFIX}(\\d+)-[A-Za-z0-9]{6}$`).exec(name)?.[1];
    if (pid === undefined || isRunning(Number(pid))) continue;
    try {
      if (lstatSync(join(tmpdir(), name)).uid !== uid) continue;
      rmSync(join(tmpdir(), name), { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // Gone meanwhile, or held by a mount: the next run tries again.
    }
  }
}
