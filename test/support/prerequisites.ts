// What the suites need from the machine, checked the same way everywhere: a missing build or
// bubblewrap fails the suite with the fix in its message, never skips it. Only root-only tests
// may be skipped, and only outside CI (CI=true, which .ci/run sets, makes that a failure too).
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AGENT_BUNDLE, HOST_JS, KEEPER_SCRIPT } from './paths.js';

/** Throws unless dist/ holds the built server, keeper and agent. */
export function requireBuild(): void {
  for (const file of [HOST_JS, KEEPER_SCRIPT, AGENT_BUNDLE]) {
    if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` first (npm test does)`);
  }
}

/** Throws unless bubblewrap runs. */
export function requireBubblewrap(): void {
  try {
    execFileSync(process.env.SANDBOX_MCP_BWRAP ?? 'bwrap', ['--version'], { stdio: 'ignore' });
  } catch {
    throw new Error('bubblewrap (bwrap) is required for these tests: apt-get install bubblewrap');
  }
}

/** What every suite with real local sandboxes needs: the build and bubblewrap. */
export function requireSandboxes(): void {
  requireBuild();
  requireBubblewrap();
}

/**
 * True when running as root. Elsewhere false (the caller skips its root-only tests, which the
 * summary counts as skipped), except under CI=true, where it throws: CI must run them.
 */
export function isRootOrSkipping(what: string): boolean {
  if (process.getuid?.() === 0) return true;
  if (process.env.CI === 'true') throw new Error(`${what} need root, and CI runs every test: run CI as root`);
  return false;
}

/** True when every command is on PATH; throws naming the missing ones otherwise (a prerequisite, never a skip). */
export function requireCommands(names: readonly string[]): true {
  const dirs = (process.env.PATH ?? '/usr/bin:/bin').split(':');
  const missing = names.filter((n) => !dirs.some((d) => existsSync(join(d, n))));
  if (missing.length > 0)
    throw new Error(`${missing.join(', ')} required by these tests: .ci/run installs them (apt-get install ${missing.join(' ')})`);
  return true;
}
