// The built server for a test that runs it as another user (e.g. nobody): the checkout itself
// when that user can read it, else a copy it can (a clone under /root or a 0700 temp directory
// is not traversable by others). The copy holds dist/ and package.json (host.js is ESM by it),
// with node_modules hard-linked (copied across file systems), and is removed when the worker exits.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOST_JS, REPO } from './paths.js';

const copies = new Map<number, string>();

/** True when `as` can read `file` (every directory above it traversable). */
function canRead(file: string, as: { uid: number; gid: number }): boolean {
  const probe = `require('fs').accessSync(${JSON.stringify(file)}, require('fs').constants.R_OK)`;
  return spawnSync(process.execPath, ['-e', probe], { ...as, stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } }).status === 0;
}

/** The path of a built `host.js` that `as` can run. */
export function hostJsReadableBy(as: { uid: number; gid: number }): string {
  if (HOST_JS !== join(REPO, 'dist/host.js') || canRead(HOST_JS, as)) return HOST_JS;
  const cached = copies.get(as.uid);
  if (cached) return cached;
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-build-'));
  chmodSync(dir, 0o755);
  cpSync(join(REPO, 'dist'), join(dir, 'dist'), { recursive: true });
  copyFileSync(join(REPO, 'package.json'), join(dir, 'package.json'));
  try {
    execFileSync('cp', ['-al', join(REPO, 'node_modules'), join(dir, 'node_modules')], { stdio: 'ignore' });
  } catch {
    cpSync(join(REPO, 'node_modules'), join(dir, 'node_modules'), { recursive: true });
  }
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  const hostJs = join(dir, 'dist/host.js');
  copies.set(as.uid, hostJs);
  return hostJs;
}
