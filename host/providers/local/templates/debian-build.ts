// `template build`: a Debian root filesystem made by mmdebstrap — apt's variant (the Essential
// packages and apt, so apt-get works inside) plus the packages asked for, fetched from Debian's
// repositories (mmdebstrap's default sources: for a stable suite also its updates and security;
// or one mirror's main component).
// Only as root: mmdebstrap's root mode keeps the files' real owners (`native` layers). A server
// of another user would need mmdebstrap's fakechroot mode (fakechroot, fakeroot, and fixing the
// absolute symlinks it leaves into the build directory) or subordinate ids for its unshare mode:
// it is told to import an archive made elsewhere instead, which it can (import-root.ts).
//
// mmdebstrap runs in a mount namespace of its own (unshare), so the /proc, /sys and /dev it
// mounts into the tree vanish with it whatever ends it, and in a process group of its own, so an
// interrupted build stops apt and dpkg too before the half-made tree is removed.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { createInterface } from 'node:readline';
import { ProviderError } from '../../provider-error.js';

/** What a build makes when asked for nothing more: the suite and mmdebstrap's variant. */
export const DEFAULT_DEBIAN_SUITE = 'stable';
export const DEBIAN_VARIANT = 'apt';

/**
 * What every command in a sandbox on a built template gets (its record's `env`): apt, dpkg and
 * debconf ask nothing and print no "unable to initialize frontend" noise, there being no terminal.
 */
export const DEBIAN_TEMPLATE_ENV: Readonly<Record<string, string>> = { DEBIAN_FRONTEND: 'noninteractive' };

/** mmdebstrap's hooks that run dpkg under eatmydata (no fsync per file: about half the build time here). */
export const EATMYDATA_HOOKS = '/usr/share/mmdebstrap/hooks/eatmydata';

/** Debian package names (Debian Policy 5.6.7). */
const PACKAGE_NAME = /^[a-z0-9][a-z0-9+.-]+$/;
const SUITE_NAME = /^[a-z][a-z0-9-]{0,31}$/;
/** mmdebstrap's special hooks split on spaces: a cache path is used only without them. */
const HOOK_SAFE_PATH = /^\/[^\s'"\\$`]*$/;
const MIRROR_URL = /^https?:\/\/[^\s'"\\$`]+$/;

/** What to build. */
export interface DebianBuildSpec {
  suite: string;
  packages: string[];
  /** Where downloaded packages are kept between builds (absolute); none: nothing is kept. */
  packageCache?: string;
  /** The one Debian mirror to use (its main component only) instead of mmdebstrap's default sources. */
  mirror?: string;
}

/** The packages of a --packages list (comma-separated); invalid_argument naming `field` for a bad name. */
export function parsePackageList(text: string | undefined, field: string): string[] {
  if (text === undefined) return [];
  const names = text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (names.some((n) => !PACKAGE_NAME.test(n))) {
    throw new ProviderError('invalid_argument', {
      code: 'bad_package_name',
      detail: `${field} must be Debian package names (lowercase letters, digits, '+', '-' and '.'), comma-separated.`,
    });
  }
  return [...new Set(names)];
}

/** Checks the suite and the package cache path; invalid_argument naming the field. */
export function checkBuildSpec(spec: DebianBuildSpec, fields: { suite: string; packageCache: string; mirror: string }): void {
  if (!SUITE_NAME.test(spec.suite)) {
    throw new ProviderError('invalid_argument', {
      code: 'bad_suite',
      detail: `${fields.suite} must be a Debian suite or codename (stable, bookworm, trixie, sid…).`,
    });
  }
  if (spec.packageCache !== undefined && (!isAbsolute(spec.packageCache) || !HOOK_SAFE_PATH.test(spec.packageCache))) {
    throw new ProviderError('invalid_argument', {
      code: 'bad_package_cache',
      detail: `${fields.packageCache} must be an absolute path without spaces, quotes, backslashes or $.`,
    });
  }
  if (spec.mirror !== undefined && !MIRROR_URL.test(spec.mirror)) {
    throw new ProviderError('invalid_argument', {
      code: 'bad_mirror',
      detail: `${fields.mirror} must be an http:// or https:// URL of a Debian mirror (like http://deb.debian.org/debian).`,
    });
  }
}

/** mmdebstrap's command line for a build into `target` (which must not exist or be empty). Pure. */
export function mmdebstrapArgs(spec: DebianBuildSpec, target: string, opts: { hasEatmydata: boolean }): string[] {
  const args = ['--mode=root', `--variant=${DEBIAN_VARIANT}`, '--format=directory'];
  if (spec.packages.length > 0) args.push(`--include=${spec.packages.join(',')}`);
  if (opts.hasEatmydata) args.push(`--hook-dir=${EATMYDATA_HOOKS}`);
  if (spec.packageCache !== undefined) {
    // The man page's recipe: the essential packages' files stay until the cache has them, then
    // the usual clean-up drops them from the tree.
    args.push(
      '--skip=essential/unlink',
      '--setup-hook=mkdir -p "$1"/var/cache/apt/archives/',
      `--setup-hook=sync-in ${spec.packageCache} /var/cache/apt/archives/`,
      `--customize-hook=sync-out /var/cache/apt/archives ${spec.packageCache}`,
    );
  }
  // mmdebstrap copies the host's resolver settings and name in: a sandbox has its own.
  args.push('--customize-hook=rm -f "$1/etc/resolv.conf" "$1/etc/hostname"');
  args.push(spec.suite, target);
  // Without one, mmdebstrap's defaults: deb.debian.org, and for a stable release its updates and security.
  if (spec.mirror !== undefined) args.push(spec.mirror);
  return args;
}

/** The refusal of a build by a server that is not root (see the module comment). */
export function buildNeedsRoot(): ProviderError {
  return new ProviderError('unsupported', {
    code: 'build_needs_root',
    detail:
      'Building a template needs root: mmdebstrap --mode=root keeps the files\u2019 real owners, and this user has no subordinate ids for its other modes. ' +
      'Make a root filesystem archive elsewhere (as root: mmdebstrap --variant=apt stable root.tar; or docker export) and run sandbox-mcp template import NAME root.tar, which makes every file this user\u2019s.',
  });
}

/** The refusal when mmdebstrap is not installed. */
export function mmdebstrapMissing(): ProviderError {
  return new ProviderError('unavailable', {
    code: 'mmdebstrap_missing',
    detail: 'mmdebstrap is not installed: apt-get install mmdebstrap (Debian, Ubuntu), then retry.',
  });
}

/** How a build's process is ended when interrupted: TERM to its group, then KILL after this long. */
const STOP_GRACE_MS = 10_000;

/**
 * Runs mmdebstrap into `target`, passing each line it prints to `onOutput`. Resolves when it
 * succeeded; throws when it failed or `signal` aborted it (its whole process group is stopped
 * first). `mmdebstrap` and `unshare` are the tools' paths.
 */
export async function runMmdebstrap(
  spec: DebianBuildSpec,
  target: string,
  tools: { mmdebstrap: string; unshare: string },
  onOutput: (line: string) => void,
  signal?: AbortSignal,
): Promise<void> {
  if (spec.packageCache !== undefined) mkdirSync(spec.packageCache, { recursive: true, mode: 0o755 });
  const args = mmdebstrapArgs(spec, target, { hasEatmydata: existsSync(EATMYDATA_HOOKS) });
  const child = spawn(tools.unshare, ['--mount', '--propagation', 'private', '--', tools.mmdebstrap, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
    env: { ...process.env, LC_ALL: 'C.UTF-8' },
  });
  for (const stream of [child.stdout, child.stderr]) createInterface({ input: stream }).on('line', onOutput);
  const ended = new Promise<{ code: number | null; spawnError: boolean }>((resolve) => {
    child.once('error', () => resolve({ code: null, spawnError: true }));
    child.once('close', (code) => resolve({ code, spawnError: false }));
  });
  const stop = () => stopGroup(child.pid, ended);
  signal?.addEventListener('abort', stop, { once: true });
  try {
    const { code, spawnError } = await ended;
    if (signal?.aborted)
      throw new ProviderError('conflict', { code: 'build_interrupted', detail: 'The build was interrupted; nothing of it was kept.' });
    if (spawnError) throw mmdebstrapMissing();
    if (code !== 0) {
      throw new ProviderError('unavailable', {
        code: 'build_failed',
        detail:
          'mmdebstrap failed (its last lines are above): check the suite and package names, and that deb.debian.org is reachable; nothing of the build was kept.',
      });
    }
  } finally {
    signal?.removeEventListener('abort', stop);
  }
}

/** TERM to the build's process group, KILL after STOP_GRACE_MS if it has not ended. */
function stopGroup(pid: number | undefined, ended: Promise<unknown>): void {
  if (pid === undefined) return;
  const send = (sig: NodeJS.Signals) => {
    try {
      process.kill(-pid, sig);
    } catch {
      // Already gone.
    }
  };
  send('SIGTERM');
  const timer = setTimeout(() => send('SIGKILL'), STOP_GRACE_MS);
  timer.unref();
  ended.then(
    () => clearTimeout(timer),
    () => clearTimeout(timer),
  );
}
