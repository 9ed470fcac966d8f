// The system side of local sandboxes: bubblewrap (present, and offering every option this server
// passes it), unprivileged user namespaces (tried for real, as the sandboxes use them), and
// util-linux's nsenter and setpriv. Paths are found the way the provider finds them (locateTool).
import { spawn, spawnSync } from 'node:child_process';
import { buildBwrapArgs, buildTemplateBwrapArgs } from '../../providers/local/launch/bwrap-args.js';
import { buildLaunchCommand, type ToolPaths } from '../../providers/local/launch/command-lines.js';
import { LOCAL_DETAILS } from '../../providers/local/errors.js';
import { classifyBwrapFailure } from '../../providers/local/keeper/bwrap-process.js';
import { findExecutable, locateTool } from '../../providers/local/system/preflight.js';
import { definedFields } from '../../util/defined-fields.js';
import { fail, ok, warn, type Check } from './check.js';
import { isAppArmorRestrictingUserns, usernsSysctlFix } from './userns-sysctl.js';

const INSTALL_BWRAP =
  'install bubblewrap: apt-get install bubblewrap (Debian/Ubuntu), dnf install bubblewrap (Fedora), pacman -S bubblewrap (Arch)';

/** The options sandbox starts pass to bwrap (base and template sandboxes), read off the provider's own argv builders. */
export function bwrapOptionsUsed(): string[] {
  const common = { statusFd: 3, readyFd: 4, network: 'isolated' as const, runtimeDir: '/r', roBindPaths: ['/p'], hidePaths: ['/p/h'] };
  const options = (args: string[]): string[] => {
    const end = args.indexOf('--');
    return args.slice(0, end < 0 ? undefined : end).filter((a) => a.startsWith('--'));
  };
  return [
    ...new Set([
      ...options(buildBwrapArgs({ ...common, passwdFd: 5, groupFd: 6, shell: '/bin/sh', etcDir: '/e' })),
      ...options(buildTemplateBwrapArgs({ ...common, rootFd: 7, usernsFd: 8, shmBytes: 1 })),
      ...options(buildTemplateBwrapArgs({ ...common, rootFd: 7 })),
    ]),
  ];
}

/** Where bubblewrap is, whether it offers what the server uses (and --size), and its version. */
export function checkBubblewrap(bwrapOverride: string | undefined): { check: Check; path: string | null; hasSize: boolean } {
  const path = locateTool('bwrap', definedFields({ bwrap: bwrapOverride }));
  if (!path) {
    const check =
      bwrapOverride === undefined
        ? fail('bubblewrap', 'bubblewrap (bwrap) is not installed: not on PATH nor in the system directories', INSTALL_BWRAP)
        : fail(
            'bubblewrap',
            'SANDBOX_MCP_BWRAP does not name an executable file',
            'point SANDBOX_MCP_BWRAP at the bwrap binary, or unset it to use bwrap from PATH',
          );
    return { check, path: null, hasSize: false };
  }
  const run = (arg: string): string => {
    const r = spawnSync(path, [arg], { encoding: 'utf8', timeout: 10_000 });
    return `${r.stdout ?? ''}\n${r.stderr ?? ''}`;
  };
  const version = /bubblewrap\s+(\d+\.\d+(?:\.\d+)?)/.exec(run('--version'))?.[1];
  const offered = new Set(run('--help').match(/--[a-z0-9][a-z0-9-]*/g) ?? []);
  const named = `bubblewrap ${version ?? '(unknown version)'} at ${path}`;
  const missing = bwrapOptionsUsed().filter((o) => !offered.has(o));
  if (missing.length > 0) {
    const check = fail(
      'bubblewrap',
      `${named} lacks options this server passes it: ${missing.join(' ')}`,
      `${INSTALL_BWRAP} — version 0.8 or later`,
    );
    return { check, path, hasSize: offered.has('--size') };
  }
  if (!offered.has('--size')) {
    const check = warn(
      'bubblewrap',
      `${named} has no --size: the writable mounts cannot be sized, so the disk budget does not hold (bubblewrap 0.7+)`,
      `${INSTALL_BWRAP} — version 0.7 or later`,
    );
    return { check, path, hasSize: false };
  }
  return { check: ok('bubblewrap', `${named} (offers every option used, and --size)`), path, hasSize: true };
}

/** nsenter (always needed) and setpriv (needed when the server runs as root, to drop privileges). */
export function checkUtilLinux(isRoot: boolean): { checks: Check[]; setpriv: string | null } {
  const nsenter = locateTool('nsenter', {});
  const setpriv = locateTool('setpriv', {});
  const flock = findExecutable('flock');
  const install = 'install util-linux (apt-get install util-linux; on Debian/Ubuntu it is always present)';
  const checks = [
    nsenter
      ? ok('nsenter', `nsenter at ${nsenter}`)
      : fail('nsenter', "util-linux's nsenter is not installed: commands cannot enter sandboxes", install),
    setpriv
      ? ok('setpriv', `setpriv at ${setpriv}${isRoot ? ' (running as root: sandboxes drop to a uid of their own)' : ''}`)
      : isRoot
        ? fail('setpriv', "util-linux's setpriv is not installed: as root, sandboxes cannot drop their privileges", install)
        : ok('setpriv', 'setpriv is not installed (needed only when the server runs as root)'),
    flock
      ? ok('flock', `flock at ${flock}`)
      : fail('flock', "util-linux's flock is not installed: creates cannot take the state directory's lock", install),
  ];
  return { checks, setpriv };
}

/** The sysctl (or AppArmor change) that lets bwrap create user namespaces, from the kernel's own settings. */
function usernsFix(kind: 'userns_apparmor' | 'userns_refused'): string {
  if (kind === 'userns_apparmor' || isAppArmorRestrictingUserns()) {
    return 'AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): give bwrap an AppArmor profile that allows `userns` (see the README, Troubleshooting), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0';
  }
  return usernsSysctlFix() ?? LOCAL_DETAILS.usernsRefused;
}

// The smallest sandbox that needs what every real one needs: a user and a pid namespace, made
// by the identity sandboxes run as (as root, an unprivileged uid through setpriv).
const PROBE_ARGS = ['--unshare-user', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', '--tmpfs', '/dev', '--', 'true'];
const PROBE_UID = 65534;

function runProbe(tools: ToolPaths, isRoot: boolean): Promise<{ code: number | null; stderr: string }> {
  const cmd = buildLaunchCommand(PROBE_ARGS, { uid: PROBE_UID, gid: PROBE_UID, dropPrivileges: isRoot }, tools);
  return new Promise((resolve) => {
    const child = spawn(cmd.file, cmd.args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 15_000 });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => {
      if (stderr.length < 8192) stderr += d.toString('utf8');
    });
    child.on('error', () => resolve({ code: null, stderr }));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

/** Tries a user namespace the way sandboxes make theirs; names the sysctl or AppArmor fix when refused. */
export async function checkUserNamespaces(bwrap: string, setpriv: string | null, isRoot: boolean): Promise<Check> {
  if (isRoot && !setpriv) return fail('user namespaces', 'not tried: as root the probe needs setpriv (see above)', 'install util-linux');
  const who = isRoot ? `as uid ${PROBE_UID}` : 'as this user';
  const { code, stderr } = await runProbe({ bwrap, nsenter: 'nsenter', setpriv: setpriv ?? 'setpriv', sh: '/bin/sh' }, isRoot);
  if (code === 0) {
    const apparmor = isAppArmorRestrictingUserns() ? ' (AppArmor restricts them, but allows bwrap)' : '';
    return ok('user namespaces', `bwrap created a user namespace ${who}${apparmor}`);
  }
  const said = stderr
    .trim()
    .split('\n')[0]
    ?.replace(/^bwrap: /, '')
    .slice(0, 200);
  const kind = classifyBwrapFailure(stderr, code);
  const what = `bwrap could not create a user namespace ${who}${said ? ` (bwrap: ${said})` : ''}`;
  if (kind === 'userns_apparmor' || kind === 'userns_refused') return fail('user namespaces', what, usernsFix(kind));
  return fail('user namespaces', what, LOCAL_DETAILS.bwrapFailed);
}
