// The bubblewrap command lines that create a sandbox: pure argv builders, so the exact flags are
// unit-tested (test/unit/bwrap-args.test.ts); the integration tests run them. Two kinds of root:
// the base template (the host's system directories, read-only, and an /etc of what programs read)
// and a template's writable root (bound from a descriptor its launch helper opened: see
// helpers/mount-root.pl). As root, bwrap runs as the sandbox's uid: whatever it binds, that uid
// must be able to reach by path (bwrap resolves even a --bind-fd descriptor to its path, measured).
import { AGENT_RUNTIME_DIR } from '../../../../shared/agent-runtime.js';
import { SANDBOX_HOME, type NetworkMode } from '../../provider.js';
import { AGENT_STATE_MOUNT } from '../limits/disk-shares.js';

/** Device nodes bound into a base sandbox's private /dev (not `--dev`: it nests a user namespace there). */
export const SANDBOX_DEVICES = ['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom', '/dev/tty'] as const;

/** Private writable scratch directories of a base sandbox (sticky, world-writable like on the host). */
export const SCRATCH_PATHS = ['/tmp', '/var/tmp', '/dev/shm'] as const;

/**
 * The host's system directories a base sandbox sees at the same place, read-only. /bin, /sbin and
 * the /lib directories are bound where they are directories, made the same symlink where the host
 * merged them into /usr, and absent where the host has none (see SystemDir).
 */
export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'] as const;

/** What the host has at one of SYSTEM_DIRS: a directory, or a symlink and its target. */
export interface SystemDir {
  path: string;
  /** The symlink's target (`usr/bin`), for a merged-/usr host; absent for a directory. */
  link?: string;
}

/**
 * Where the operator's terminal links its name (launch/terminal-command.ts): the one writable
 * place in a base sandbox's read-only /dev, and small (its links are inline in their inodes).
 */
export const TERMINAL_LINKS_PATH = '/dev/pts';
export const TERMINAL_LINKS_BYTES = 64 * 1024;

/** The host name every sandbox has in its own UTS namespace. */
export const SANDBOX_HOSTNAME = 'sandbox';

/**
 * What pid 1 waits on in a root without `sleep` (a root with only a shell): builtins alone, never a
 * loop that forks as fast as it can. A shell that stops itself holds a pipe's write end; another
 * reads from it, and so blocks, until someone continues or kills the first. Pid 1 waits for the
 * pair (reaping orphans meanwhile), so each round starts only after something inside ended one.
 * The argvs (quoted as the script gives them) let stop_processes leave them alone.
 */
export const PID1_STOPPED_SHELLS: readonly (readonly string[])[] = [
  ['/bin/sh', '-c', 'kill -STOP $$'],
  ['/bin/sh', '-c', 'read x'],
];
const PID1_STOPPED_WAITER = [`/bin/sh -c 'kill -STOP $$'`, '|', `/bin/sh -c 'read x'`];

/**
 * Pid 1 of every sandbox: announce readiness on fd 4, drop every descriptor it was started with,
 * then loop forever (on `sleep`, or on PID1_STOPPED_SHELLS where there is none or it cannot run). Being pid 1 itself (bwrap --as-pid-1) makes it immune to signals sent from
 * inside the sandbox (`kill -9 -1`, `pkill sleep`); the loop's `wait` reaps reparented orphans.
 * Only single-digit descriptors, which every POSIX shell can name (a template may have only dash
 * or busybox); bwrap closes the ones it read mounts from itself.
 */
export const PID1_SCRIPT =
  'printf ready >&4; exec 3>&- 4>&- 5<&- 6<&- 7<&- 8<&- 9<&- </dev/null >/dev/null 2>&1; ' +
  'w=sleep; command -v sleep >/dev/null 2>&1 || w=stop; ' +
  `while :; do if [ $w = sleep ]; then sleep 86400 & wait $!; else ${PID1_STOPPED_WAITER.join(' ')}; fi; ` +
  'case $? in 126|127) w=stop ;; esac; done';

/** Where a sandbox sees its workspace: the person's directory, writable, copy-on-write. */
export const WORKSPACE_PATH = '/workspace';

/**
 * Where the agent finds the workspace as it started (the overlay's lower) and what the sandbox
 * wrote (its upper), read-only, to compute the changes (shared/workspace/changes.ts).
 */
export const WORKSPACE_BASE_VIEW = '/.sandbox-mcp/workspace/base';
export const WORKSPACE_UPPER_VIEW = '/.sandbox-mcp/workspace/upper';

/** A workspace's mounts, made by the launch helper (helpers/mount-root.pl): host paths bwrap binds. */
export interface WorkspaceMounts {
  /** The overlay, bound writable at WORKSPACE_PATH. */
  merged: string;
  /** Its lower (the person's directory), bound read-only at WORKSPACE_BASE_VIEW. */
  lower: string;
  /** Its upper, bound read-only at WORKSPACE_UPPER_VIEW. */
  upper: string;
}

/** The binds of a workspace (none without one). */
function workspaceBinds(ws: WorkspaceMounts | undefined): string[] {
  if (!ws) return [];
  // prettier-ignore
  return [
    '--bind', ws.merged, WORKSPACE_PATH,
    '--ro-bind', ws.lower, WORKSPACE_BASE_VIEW,
    '--ro-bind', ws.upper, WORKSPACE_UPPER_VIEW,
  ];
}

/** What both kinds of sandbox share: how bwrap reports, and what else is shown or hidden. */
interface CommonOpts {
  /** Descriptor on which bwrap reports `{"child-pid": …}` (the host pid of the sandbox's pid 1). */
  statusFd: number;
  /** Descriptor on which pid 1 writes `ready` once every mount is in place. */
  readyFd: number;
  /** The agent's runtime directory on the host (shared/agent-runtime.ts), bound at AGENT_RUNTIME_DIR. */
  runtimeDir?: string;
  /** The person's read-only host paths (--sandbox-ro-bind), each shown at the same place. */
  roBindPaths?: readonly string[];
  /** Host paths to cover with an empty, read-only tmpfs (the server's own directories under a bound path). */
  hidePaths?: readonly string[];
  /** Default `isolated`: only `host` leaves the network namespace shared. */
  network?: NetworkMode;
  /** The workspace's mounts, when the sandbox has one. */
  workspace?: WorkspaceMounts;
}

/** The base template's sandbox. */
export interface BwrapArgsOpts extends CommonOpts {
  /** Descriptors bwrap reads the sandbox's own /etc/passwd and /etc/group from. */
  passwdFd: number;
  groupFd: number;
  /** The base view's /etc on the host (rootfs/base-view.ts), with empty passwd and group to bind them over. */
  etcDir?: string;
  /** What the host has at SYSTEM_DIRS (rootfs/base-view.ts's hostSystemDirs); default: /usr alone. */
  systemDirs?: readonly SystemDir[];
  /** Shell that runs pid 1 (`/bin/bash`, or `/bin/sh` where bash is missing). */
  shell: string;
  /**
   * Size in bytes of each writable tmpfs, by path (the home and SCRATCH_PATHS; bubblewrap 0.7+).
   * A path without one gets the kernel's default size: half of the machine's memory.
   */
  mountSizes?: Readonly<Record<string, number>>;
}

/** The flags every sandbox starts with: reporting, pid 1 itself, and the namespaces but the user's. */
function namespaceArgs(opts: CommonOpts, user: string[]): string[] {
  // Each flag stays on one line with its values (hence prettier-ignore).
  // prettier-ignore
  return [
    '--die-with-parent',
    '--new-session',
    '--as-pid-1',
    '--json-status-fd', String(opts.statusFd),
    ...user, '--unshare-pid', '--unshare-ipc', '--unshare-uts',
    // bwrap brings the new namespace's loopback up itself.
    ...(opts.network === 'host' ? [] : ['--unshare-net']),
    '--hostname', SANDBOX_HOSTNAME,
  ];
}

/** The person's read-only paths, then the covers of the server's directories below them. */
function boundHostPaths(opts: CommonOpts): string[] {
  const args: string[] = [];
  for (const path of opts.roBindPaths ?? []) args.push('--ro-bind', path, path);
  for (const path of opts.hidePaths ?? []) args.push('--tmpfs', path);
  return args;
}

/**
 * The agent's state directory on a tmpfs of its own, sized (none without a size: an unsized tmpfs
 * could take half of the machine's memory): the sandbox's files can fill its home or root, never
 * the room the agent records output in. Private to the user (mode 0700), as the agent makes it.
 */
function agentStateMount(bytes: number | undefined): string[] {
  return bytes === undefined ? [] : ['--perms', '0700', '--size', String(bytes), '--tmpfs', AGENT_STATE_MOUNT];
}

/** The bwrap arguments (without the program name) that start a base sandbox. */
export function buildBwrapArgs(opts: BwrapArgsOpts): string[] {
  const args = namespaceArgs(opts, ['--unshare-user']);
  // The root is bubblewrap's own tmpfs, read-only at the end: nothing of the host's but what is bound here.
  for (const dir of opts.systemDirs ?? [{ path: '/usr' }]) {
    if (dir.link !== undefined) args.push('--symlink', dir.link, dir.path);
    else args.push('--ro-bind', dir.path, dir.path);
  }
  if (opts.etcDir !== undefined) args.push('--ro-bind', opts.etcDir, '/etc');
  args.push('--proc', '/proc', '--tmpfs', '/dev');
  for (const dev of SANDBOX_DEVICES) args.push('--dev-bind', dev, dev);
  const terminalSize = opts.mountSizes ? ['--size', String(TERMINAL_LINKS_BYTES)] : [];
  args.push('--perms', '0755', ...terminalSize, '--tmpfs', TERMINAL_LINKS_PATH);
  // prettier-ignore
  args.push(
    '--symlink', '/proc/self/fd', '/dev/fd',
    '--symlink', '/proc/self/fd/0', '/dev/stdin',
    '--symlink', '/proc/self/fd/1', '/dev/stdout',
    '--symlink', '/proc/self/fd/2', '/dev/stderr',
  );
  const size = (path: string): string[] => (opts.mountSizes?.[path] !== undefined ? ['--size', String(opts.mountSizes[path])] : []);
  args.push('--perms', '0700', ...size(SANDBOX_HOME), '--tmpfs', SANDBOX_HOME);
  args.push(...agentStateMount(opts.mountSizes?.[AGENT_STATE_MOUNT]));
  for (const path of SCRATCH_PATHS) args.push('--perms', '1777', ...size(path), '--tmpfs', path);
  args.push('--dir', '/run', '--symlink', '../run', '/var/run');
  // After the writable mounts, which would otherwise cover a bound path below them (one in /tmp, say).
  args.push(...boundHostPaths(opts));
  if (opts.runtimeDir !== undefined) args.push('--ro-bind', opts.runtimeDir, AGENT_RUNTIME_DIR);
  args.push(...workspaceBinds(opts.workspace));
  args.push('--ro-bind-data', String(opts.passwdFd), '/etc/passwd', '--ro-bind-data', String(opts.groupFd), '/etc/group');
  // /dev, the covers and the root hold nothing but mount points and device nodes: read-only, they
  // cannot hold the sandbox's files either (unsized, each could take half of the machine's memory).
  // Remounting one leaves the mounts below it writable.
  for (const path of ['/dev', ...(opts.hidePaths ?? []), '/']) args.push('--remount-ro', path);
  args.push('--chdir', SANDBOX_HOME, '--', opts.shell, '-c', PID1_SCRIPT);
  return args;
}

/** A template's sandbox (see helpers/mount-root.pl for the descriptors it is started with). */
export interface TemplateBwrapArgsOpts extends CommonOpts {
  /** The merged writable root, opened by the launch helper. */
  rootFd: number;
  /**
   * The sandbox's user namespace, made by the launch helper (a root server: `--userns FD`); absent:
   * bwrap makes it, as root of the helper's own namespace, and must drop every capability there.
   */
  usernsFd?: number;
  /** Size in bytes of /dev/shm (the writable root itself is sized by the launch helper). */
  shmBytes?: number;
  /** Size in bytes of the agent's state mount (none: the state stays in the root). */
  agentStateBytes?: number;
}

/**
 * The bwrap arguments (without the program name) that start a template's sandbox: its commands run
 * as root of its user namespace (the template's files are root's) with none of root's capabilities
 * that could mount, escape the disk budget or touch the host (entry drops them: helpers/enter.pl).
 */
export function buildTemplateBwrapArgs(opts: TemplateBwrapArgsOpts): string[] {
  const user = opts.usernsFd !== undefined ? ['--userns', String(opts.usernsFd)] : ['--unshare-user', '--cap-drop', 'ALL'];
  const args = namespaceArgs(opts, user);
  // prettier-ignore
  args.push(
    '--uid', '0', '--gid', '0',
    '--bind-fd', String(opts.rootFd), '/',
    // Root of its IPC namespace's owner may write the IPC sysctls, capabilities or not: the keeper's bounds must hold.
    '--proc', '/proc', '--ro-bind', '/proc/sys', '/proc/sys',
    // Uid 0 inside: bwrap's own /dev (with a devpts instance) nests no user namespace.
    '--dev', '/dev',
    '--perms', '1777', ...(opts.shmBytes !== undefined ? ['--size', String(opts.shmBytes)] : []), '--tmpfs', '/dev/shm',
    '--perms', '0700', '--dir', SANDBOX_HOME,
    '--perms', '1777', '--dir', '/tmp',
    '--perms', '1777', '--dir', '/var/tmp',
  );
  args.push(...agentStateMount(opts.agentStateBytes));
  if (opts.runtimeDir !== undefined || opts.workspace !== undefined) {
    // On a read-only tmpfs of its own: a mount point cannot be renamed away by the sandbox.
    const mountPoint = AGENT_RUNTIME_DIR.slice(0, AGENT_RUNTIME_DIR.lastIndexOf('/'));
    args.push('--perms', '0755', '--size', '4096', '--tmpfs', mountPoint);
    if (opts.runtimeDir !== undefined) args.push('--ro-bind', opts.runtimeDir, AGENT_RUNTIME_DIR);
    args.push(...workspaceBinds(opts.workspace), '--remount-ro', mountPoint);
  }
  args.push(...boundHostPaths(opts));
  for (const path of ['/dev', ...(opts.hidePaths ?? [])]) args.push('--remount-ro', path);
  args.push('--chdir', SANDBOX_HOME, '--', '/bin/sh', '-c', PID1_SCRIPT);
  return args;
}
