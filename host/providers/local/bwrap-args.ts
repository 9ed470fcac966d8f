// Pure argv builders for the local provider: the bubblewrap command line that creates a sandbox
// and the setpriv + nsenter command line that enters one. Nothing here touches the system, so
// the exact flags are unit-tested (test/local/bwrap-args.test.ts); the integration tests run them.
import { SANDBOX_HOME, type NetworkMode } from '../provider.js';

/** Device nodes bound into the sandbox's private /dev (not `--dev`: it nests a user namespace). */
export const SANDBOX_DEVICES = ['/dev/null', '/dev/zero', '/dev/full', '/dev/random', '/dev/urandom', '/dev/tty'] as const;

/** Host paths always covered by an empty private tmpfs inside the sandbox. */
export const HIDDEN_PATHS = ['/home', '/root', '/run'] as const;

/** Private writable scratch directories (sticky, world-writable like on the host). */
export const SCRATCH_PATHS = ['/tmp', '/var/tmp', '/dev/shm'] as const;

export const SANDBOX_HOSTNAME = 'sandbox';

/**
 * Pid 1 of every sandbox: announce readiness on fd 4, drop every inherited descriptor, then
 * loop forever. Being pid 1 itself (bwrap --as-pid-1) makes it immune to signals sent from
 * inside the sandbox (`kill -9 -1`, `pkill sleep`); the loop's `wait` reaps reparented orphans.
 */
export const PID1_SCRIPT = 'printf ready >&4; exec 3>&- 4>&- 5<&- 6<&- </dev/null >/dev/null 2>&1; while :; do sleep 86400 & wait $!; done';

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
  // prettier-ignore
  args.push(
    '--symlink', '/proc/self/fd', '/dev/fd',
    '--symlink', '/proc/self/fd/0', '/dev/stdin',
    '--symlink', '/proc/self/fd/1', '/dev/stdout',
    '--symlink', '/proc/self/fd/2', '/dev/stderr',
  );
  for (const path of HIDDEN_PATHS) args.push('--tmpfs', path);
  if (opts.hideVarRun) args.push('--tmpfs', '/var/run');
  for (const path of opts.hidePaths ?? []) args.push('--tmpfs', path);
  args.push('--perms', '0700', '--tmpfs', SANDBOX_HOME);
  for (const path of SCRATCH_PATHS) args.push('--perms', '1777', '--tmpfs', path);
  // Last, so that nothing mounted above can cover them again.
  for (const path of opts.roBindPaths ?? []) args.push('--ro-bind', path, path);
  // prettier-ignore
  args.push(
    '--ro-bind-data', String(opts.passwdFd), '/etc/passwd',
    '--ro-bind-data', String(opts.groupFd), '/etc/group',
    '--chdir', SANDBOX_HOME,
    '--', opts.shell, '-c', PID1_SCRIPT,
  );
  return args;
}

/** Who runs the sandbox: when the host runs as root, an unprivileged uid of its own with no capabilities. */
export interface Identity {
  uid: number;
  gid: number;
  /** True when the host runs as root and must drop to uid/gid via setpriv. */
  dropPrivileges: boolean;
}

export interface ToolPaths {
  bwrap: string;
  nsenter: string;
  setpriv: string;
  sh: string;
}

/** A program and its arguments, ready for spawn (with uid/gid: spawn drops to them, groups cleared). */
export interface Command {
  file: string;
  args: string[];
  uid?: number;
  gid?: number;
}

// Moves the shell into each cgroup (by its cgroup.procs file) before exec'ing the rest, so the
// command and everything it forks are accounted from their first instruction.
const CGROUP_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

function setprivArgs(id: Identity): string[] {
  // prettier-ignore
  return [
    `--reuid=${id.uid}`, `--regid=${id.gid}`, '--clear-groups',
    '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs',
  ];
}

/** Prefixes `inner` with the cgroup join and, as root, the privilege drop. */
function wrap(inner: Command, id: Identity, tools: ToolPaths, cgroupProcsFiles: readonly string[]): Command {
  let cmd = inner;
  if (id.dropPrivileges) cmd = { file: tools.setpriv, args: [...setprivArgs(id), cmd.file, ...cmd.args] };
  if (cgroupProcsFiles.length > 0) {
    cmd = { file: tools.sh, args: ['-c', CGROUP_JOIN_SCRIPT, 'sh', ...cgroupProcsFiles, '--', cmd.file, ...cmd.args] };
  }
  return cmd;
}

/** The full command the keeper spawns to start a sandbox. */
export function buildLaunchCommand(bwrapArgs: string[], id: Identity, tools: ToolPaths, cgroupProcsFiles: readonly string[] = []): Command {
  return wrap({ file: tools.bwrap, args: bwrapArgs }, id, tools, cgroupProcsFiles);
}

/**
 * The full command that runs `argv` inside a sandbox whose pid 1 has host pid `pid1`, in its
 * network namespace too unless the sandbox shares the host's (`network` must be the mode it was
 * created with: entering the host's namespace from the sandbox's user namespace is refused). As root,
 * the command carries uid/gid for spawn to drop to (libuv clears supplementary groups; setuid
 * clears every capability) — one exec fewer than setpriv, which is most of exec's overhead.
 * With cgroups, the join runs before the drop (as the keeper's does), then setpriv drops: cgroup
 * v2 lets only a writer of the common ancestor's cgroup.procs move a process, i.e. root.
 */
export function buildEnterCommand(
  pid1: number,
  argv: readonly string[],
  id: Identity,
  tools: ToolPaths,
  cgroupProcsFiles: readonly string[] = [],
  network: NetworkMode = 'isolated',
): Command {
  const namespaces = ['-U', '-p', '-m', '-i', '-u', ...(network === 'host' ? [] : ['-n'])];
  const cmd: Command = {
    file: tools.nsenter,
    args: ['-t', String(pid1), '--preserve-credentials', ...namespaces, '-r', '-w', '--', ...argv],
  };
  if (cgroupProcsFiles.length > 0) return wrap(cmd, id, tools, cgroupProcsFiles);
  return id.dropPrivileges ? { ...cmd, uid: id.uid, gid: id.gid } : cmd;
}

/**
 * `cmd` with a privilege drop that spawn would have done (its uid/gid) done by setpriv instead, for
 * spawners that only call setgid/setuid and so would keep root's supplementary groups (node-pty's
 * fork). A command without uid/gid is returned unchanged.
 */
export function dropWithSetpriv(cmd: Command, tools: ToolPaths): Command {
  if (cmd.uid === undefined || cmd.gid === undefined) return cmd;
  return { file: tools.setpriv, args: [...setprivArgs({ uid: cmd.uid, gid: cmd.gid, dropPrivileges: true }), cmd.file, ...cmd.args] };
}

/** The descriptor on which a command's environment reaches the sandbox (see envPrelude). */
export const ENV_FD = 4;

const ENV_VAR = '__sandbox_mcp_env';

/**
 * Shell text that runs `$1` as a command after sourcing its environment from fd 4. The
 * environment the caller chooses must not reach the host-side helpers (nsenter, the cgroup
 * join): their dynamic loader would obey LD_PRELOAD, LD_DEBUG_OUTPUT and the like outside the
 * sandbox. A pipe also keeps values out of command lines, which every host user can read.
 * fd 4 is a socket (node's pipes are), which /dev/fd cannot reopen: bash reads it with its
 * `read` builtin (no extra process), other shells with cat. `set --` inside the eval'd text
 * clears the positional parameters before the command runs.
 */
export function envPrelude(shell: string): string {
  const read = shell.endsWith('bash') ? `IFS= read -r -d '' -u ${ENV_FD} ${ENV_VAR}` : `${ENV_VAR}=$(cat <&${ENV_FD})`;
  return `${read}; exec ${ENV_FD}<&-; [ -n "$${ENV_VAR}" ] || exit 125; eval "$${ENV_VAR}"; unset ${ENV_VAR}; eval "set --; $1"`;
}

/** Shell text exporting `env` (names already validated as identifiers), for ENV_PRELUDE to source. */
export function exportScript(env: Readonly<Record<string, string>>): string {
  const lines = Object.entries(env).map(([name, value]) => `export ${name}='${value.replaceAll("'", "'\\''")}'`);
  // A read-only name (bash's UID, SHELLOPTS…) fails its export, as the environment would be ignored; not the whole source.
  return lines.join('\n') + '\n:\n';
}

/** Changes into `$1` (reporting success with one byte on fd 3), then execs the rest unchanged. */
export const CHDIR_SCRIPT = 'cd -- "$1" 2>/dev/null || exit 1; printf . >&3; exec 3>&-; shift; exec "$@"';

// Host ids the sandbox's user namespace does not map (root's files, for one) show as the overflow id.
const OVERFLOW_ID = 65534;

/** The sandbox's /etc/passwd: its uid is `user`, home /home/user; unmapped owners show as `nobody`. */
export function passwdFile(id: Identity, shell: string): string {
  const nobody = id.uid === OVERFLOW_ID ? '' : `nobody:x:${OVERFLOW_ID}:${OVERFLOW_ID}:nobody:/nonexistent:/usr/sbin/nologin\n`;
  return `root:x:0:0:root:/root:/bin/sh\nuser:x:${id.uid}:${id.gid}:user:${SANDBOX_HOME}:${shell}\n${nobody}`;
}

/** The sandbox's /etc/group. */
export function groupFile(id: Identity): string {
  const nogroup = id.gid === OVERFLOW_ID ? '' : `nogroup:x:${OVERFLOW_ID}:\n`;
  return `root:x:0:\nuser:x:${id.gid}:\n${nogroup}`;
}

/** The default PATH inside a sandbox, plus extra directories (node's bin) when not already there. */
export function sandboxPath(extraDirs: readonly string[] = []): string {
  const dirs = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  for (const dir of extraDirs) if (!dirs.includes(dir)) dirs.push(dir);
  return dirs.join(':');
}
