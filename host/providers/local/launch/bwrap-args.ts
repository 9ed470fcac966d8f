// The bubblewrap command line that creates a sandbox: a pure argv builder, so the exact flags are
// unit-tested (test/unit/bwrap-args.test.ts); the integration tests run them.
import { SANDBOX_HOME, type NetworkMode } from '../../provider.js';

/** Device nodes bound into the sandbox's private /dev (not `--dev`: it nests a user namespace). */
export const SANDBOX_DEVICES = ['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom', '/dev/tty'] as const;

/** Host paths always covered by an empty, read-only tmpfs inside the sandbox. */
export const HIDDEN_PATHS = ['/home', '/root', '/run'] as const;

/** Private writable scratch directories (sticky, world-writable like on the host). */
export const SCRATCH_PATHS = ['/tmp', '/var/tmp', '/dev/shm'] as const;

/**
 * Where the operator's terminal links its name (launch/terminal-command.ts): the one writable
 * place in the read-only /dev, and small (its links are inline in their inodes).
 */
export const TERMINAL_LINKS_PATH = '/dev/pts';
export const TERMINAL_LINKS_BYTES = 64 * 1024;

/** The host name every sandbox has in its own UTS namespace. */
export const SANDBOX_HOSTNAME = 'sandbox';

/**
 * Pid 1 of every sandbox: announce readiness on fd 4, drop every inherited descriptor, then
 * loop forever. Being pid 1 itself (bwrap --as-pid-1) makes it immune to signals sent from
 * inside the sandbox (`kill -9 -1`, `pkill sleep`); the loop's `wait` reaps reparented orphans.
 */
export const PID1_SCRIPT = 'printf ready >&4; exec 3>&- 4>&- 5<&- 6<&- </dev/null >/dev/null 2>&1; while :; do sleep 86400 & wait $!; done';

/** What buildBwrapArgs needs: the descriptors it talks on and what this host hides or binds back. */
export interface BwrapArgsOpts {
  /** Descriptor on which bwrap reports `{"child-pid": …}` (the host pid of the sandbox's pid 1). */
  statusFd: number;
  /** Descriptor on which pid 1 writes `ready` once every mount is in place. */
  readyFd: number;
  /** Descriptors bwrap reads the sandbox's own /etc/passwd and /etc/group from. */
  passwdFd: number;
  groupFd: number;
  /** Shell that runs pid 1 (`/bin/bash`, or `/bin/sh` where bash is missing). */
  shell: string;
  /** Extra host paths to cover with an empty tmpfs (e.g. a state directory outside /home and /root). */
  hidePaths?: readonly string[];
  /** Host paths bound back read-only after hiding (e.g. node's prefix under /home). */
  roBindPaths?: readonly string[];
  /** Cover /var/run too (when it is a directory rather than the usual symlink to /run). */
  hideVarRun?: boolean;
  /** Default `isolated`: only `host` leaves the network namespace shared. */
  network?: NetworkMode;
  /**
   * Size in bytes of each writable tmpfs, by path (the home and SCRATCH_PATHS; bubblewrap 0.7+).
   * A path without one gets the kernel's default size: half of the machine's memory.
   */
  mountSizes?: Readonly<Record<string, number>>;
}

/** The bwrap arguments (without the program name) that start one sandbox. */
export function buildBwrapArgs(opts: BwrapArgsOpts): string[] {
  // Each flag stays on one line with its values (hence prettier-ignore).
  // prettier-ignore
  const args = [
    '--die-with-parent',
    '--new-session',
    '--as-pid-1',
    '--json-status-fd', String(opts.statusFd),
    '--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts',
    // bwrap brings the new namespace's loopback up itself.
    ...(opts.network === 'host' ? [] : ['--unshare-net']),
    '--hostname', SANDBOX_HOSTNAME,
    '--ro-bind', '/', '/',
    '--proc', '/proc',
    '--tmpfs', '/dev',
  ];
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
  // Covers, then the writable mounts inside them (bwrap makes their mount points in the covers).
  const hidden = [...HIDDEN_PATHS, ...(opts.hideVarRun ? ['/var/run'] : []), ...(opts.hidePaths ?? [])];
  for (const path of hidden) args.push('--tmpfs', path);
  const size = (path: string): string[] => (opts.mountSizes?.[path] !== undefined ? ['--size', String(opts.mountSizes[path])] : []);
  args.push('--perms', '0700', ...size(SANDBOX_HOME), '--tmpfs', SANDBOX_HOME);
  for (const path of SCRATCH_PATHS) args.push('--perms', '1777', ...size(path), '--tmpfs', path);
  // Last, so that nothing mounted above can cover them again.
  for (const path of opts.roBindPaths ?? []) args.push('--ro-bind', path, path);
  // /dev and the covers hold nothing but mount points and device nodes: read-only, they cannot
  // hold the sandbox's files either (unsized, each could take half of the machine's memory).
  // Remounting one leaves the mounts below it writable.
  for (const path of ['/dev', ...hidden]) args.push('--remount-ro', path);
  // prettier-ignore
  args.push(
    '--ro-bind-data', String(opts.passwdFd), '/etc/passwd',
    '--ro-bind-data', String(opts.groupFd), '/etc/group',
    '--chdir', SANDBOX_HOME,
    '--', opts.shell, '-c', PID1_SCRIPT,
  );
  return args;
}
