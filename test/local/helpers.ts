// Shared set-up for the local provider's integration tests: real bubblewrap sandboxes in a
// private state directory. Without bwrap the suites skip locally but FAIL in CI (CI=true).
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
export const KEEPER_SCRIPT = join(REPO, 'dist', 'keeper.js');
export const AGENT_BUNDLE = join(REPO, 'dist', 'agent.cjs');

function hasBwrap(): boolean {
  try {
    execFileSync('bwrap', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** True when the integration suites can run; throws in CI when bubblewrap is missing. */
export function sandboxesAvailable(): boolean {
  const ok = hasBwrap();
  if (!ok && process.env.CI === 'true') throw new Error('bubblewrap (bwrap) is required in CI: .ci/run installs it');
  if (ok && !existsSync(KEEPER_SCRIPT)) throw new Error('dist/keeper.js is missing: run `npm run build` first');
  return ok;
}

/** True when every command is on PATH; throws naming the missing ones otherwise (a prerequisite, never a skip). */
export function requireCommands(names: readonly string[]): true {
  const dirs = (process.env.PATH ?? '/usr/bin:/bin').split(':');
  const missing = names.filter((n) => !dirs.some((d) => existsSync(join(d, n))));
  if (missing.length > 0)
    throw new Error(`${missing.join(', ')} required by these tests: .ci/run installs them (apt-get install ${missing.join(' ')})`);
  return true;
}

/** A fresh private state directory; remove it with the returned function. */
export function tempStateDir(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-local-test-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Polls `pred` every `pollMs` until it holds; throws after `timeoutMs` (a bound, not a timing claim). */
export async function waitFor(pred: () => boolean | Promise<boolean>, timeoutMs = 15_000, pollMs = 25): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((r) => setTimeout(r, pollMs));
  }
}

/** A clean environment for node child processes (NODE_EXTRA_CA_CERTS slows every start). */
export function cleanNodeEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin' };
}
