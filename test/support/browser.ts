// A real browser for the tests: Debian's chromium, headless, driven by playwright-core (which
// downloads no browser of its own). A missing chromium fails the suite with the fix in its
// message, never skips it. One browser per test file: each case opens a context of its own.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { REPO } from './paths.js';
import { scratchDir } from './scratch.js';

/** Where the browser tests save their screenshots (git-ignored; CI keeps them as artefacts). */
export const SCREENSHOTS = join(REPO, 'test-artifacts', 'screenshots');

/** The chromium executable on PATH; throws with the fix when there is none. */
export function requireChromium(): string {
  try {
    return execFileSync('sh', ['-c', 'command -v chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('chromium is required for the browser tests: apt-get install chromium (.ci/run installs it)');
  }
}

/**
 * Starts headless chromium (a fresh profile each time: playwright makes one, and removes it on
 * close). Chromium's own temporary files (its singleton socket's org.chromium.Chromium.* folder,
 * left when it is killed rather than closed) go to a scratch folder removed when the file ends.
 */
export async function launchBrowser(): Promise<Browser> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  return chromium.launch({
    executablePath: requireChromium(),
    env: { ...process.env, TMPDIR: scratchDir('chromium-') },
    // No sandbox of chromium's own: the tests run as root, where it refuses to start with one.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/** The path of screenshot `name` (a .png under SCREENSHOTS). */
export function screenshotPath(name: string): string {
  return join(SCREENSHOTS, `${name}.png`);
}
