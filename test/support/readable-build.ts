// The built server for a test that runs it as another user (e.g. nobody): the checkout itself
// when that user can read it, else a copy it can (a clone under /root or a 0700 temp directory
// is not traversable by others). The copy holds dist/ and package.json (host.js is ESM by it),
// with node_modules hard-linked (copied across file systems). It is named after the worker's pid
// and removed when the worker exits, or, since vitest ends its workers with SIGTERM (no exit
// event), by the next copy made on this machine once that pid no longer runs.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOST_JS, REPO } from './paths.js';
import { isRunning } from './processes.js';

const COPY_PREFIX = 'sandbox-mcp-build-';

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
  removeCopiesOfEndedWorkers();
  const dir = mkdtempSync(join(tmpdir(), `${COPY_PREFIX}${process.pid}-`));
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

/** Removes the copies whose worker no longer runs (another worker may be removing one too: its errors are ignored). */
function removeCopiesOfEndedWorkers(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = new RegExp(`^${COPY_PREFIX}(\\d+)-`).exec(name)?.[1];
    if (pid === undefined || isRunning(Number(pid))) continue;
    try {
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    } catch {
      // Gone meanwhile.
    }
  }
}
