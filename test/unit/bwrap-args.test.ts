// The bwrap argv of a local sandbox, a pure builder asserted by position.
import { describe, expect, it } from 'vitest';
import { buildBwrapArgs, PID1_SCRIPT } from '../../host/providers/local/launch/bwrap-args.js';
import { writableMountSizes } from '../../host/providers/local/limits/disk-shares.js';

const base = { statusFd: 3, readyFd: 4, passwdFd: 5, groupFd: 6, shell: '/bin/bash' };

/** Index of the first `flag` followed by `value` (-1 when absent). */
function pairIndex(args: string[], flag: string, ...values: string[]): number {
  return args.findIndex((a, i) => a === flag && values.every((v, j) => args[i + 1 + j] === v));
}

describe('buildBwrapArgs', () => {
  const args = buildBwrapArgs(base);

  it('unshares user, pid, ipc, uts and (by default) net, with pid 1 itself as the main process', () => {
    for (const f of [
      '--unshare-user',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-uts',
      '--unshare-net',
      '--as-pid-1',
      '--die-with-parent',
      '--new-session',
    ]) {
      expect(args).toContain(f);
    }
    expect(args.slice(-4)).toEqual(['--', '/bin/bash', '-c', PID1_SCRIPT]);
  });

  it("shares the host's network only when asked to", () => {
    expect(buildBwrapArgs({ ...base, network: 'isolated' })).toContain('--unshare-net');
    const shared = buildBwrapArgs({ ...base, network: 'host' });
    expect(shared).not.toContain('--unshare-net');
    expect(shared).toContain('--unshare-user');
  });

  it('avoids the flags that nest a second user namespace (nsenter could not enter)', () => {
    expect(args).not.toContain('--dev');
    expect(args).not.toContain('--uid');
    expect(args).not.toContain('--gid');
    expect(args).not.toContain('--disable-userns');
  });

  it('mounts the host root read-only, a fresh /proc and a minimal /dev', () => {
    expect(pairIndex(args, '--ro-bind', '/', '/')).toBeGreaterThanOrEqual(0);
    expect(pairIndex(args, '--proc', '/proc')).toBeGreaterThan(pairIndex(args, '--ro-bind', '/', '/'));
    expect(pairIndex(args, '--tmpfs', '/dev')).toBeGreaterThan(0);
    expect(pairIndex(args, '--dev-bind', '/dev/null', '/dev/null')).toBeGreaterThan(pairIndex(args, '--tmpfs', '/dev'));
    expect(pairIndex(args, '--json-status-fd', '3')).toBeGreaterThanOrEqual(0);
  });

  it('hides /home, /root and /run and gives private /home/user (0700) and /tmp (1777)', () => {
    for (const p of ['/home', '/root', '/run']) expect(pairIndex(args, '--tmpfs', p)).toBeGreaterThan(0);
    const home = pairIndex(args, '--perms', '0700', '--tmpfs', '/home/user');
    expect(home).toBeGreaterThan(pairIndex(args, '--tmpfs', '/home'));
    expect(pairIndex(args, '--perms', '1777', '--tmpfs', '/tmp')).toBeGreaterThan(0);
    expect(pairIndex(args, '--ro-bind-data', '5', '/etc/passwd')).toBeGreaterThan(0);
    expect(pairIndex(args, '--ro-bind-data', '6', '/etc/group')).toBeGreaterThan(0);
    expect(pairIndex(args, '--chdir', '/home/user')).toBeGreaterThan(0);
  });

  it('covers extra paths and binds node back after everything that could hide it', () => {
    const a = buildBwrapArgs({ ...base, hidePaths: ['/srv/state'], roBindPaths: ['/home/me/.nvm/v20'], hideVarRun: true });
    expect(pairIndex(a, '--tmpfs', '/srv/state')).toBeGreaterThan(0);
    expect(pairIndex(a, '--tmpfs', '/var/run')).toBeGreaterThan(0);
    const bind = pairIndex(a, '--ro-bind', '/home/me/.nvm/v20', '/home/me/.nvm/v20');
    expect(bind).toBeGreaterThan(pairIndex(a, '--tmpfs', '/home'));
    expect(bind).toBeGreaterThan(pairIndex(a, '--tmpfs', '/home/user'));
    expect(pairIndex(args, '--tmpfs', '/var/run')).toBe(-1);
  });

  it('sizes each writable tmpfs it is given a size for (the flag right before its --tmpfs)', () => {
    const sizes = writableMountSizes(64);
    const a = buildBwrapArgs({ ...base, mountSizes: sizes });
    expect(pairIndex(a, '--perms', '0700', '--size', String(32 * 1024 * 1024), '--tmpfs', '/home/user')).toBeGreaterThan(0);
    expect(pairIndex(a, '--perms', '1777', '--size', String(16 * 1024 * 1024), '--tmpfs', '/tmp')).toBeGreaterThan(0);
    for (const p of ['/var/tmp', '/dev/shm'])
      expect(pairIndex(a, '--perms', '1777', '--size', String(8 * 1024 * 1024), '--tmpfs', p)).toBeGreaterThan(0);
    // The terminal's links get a small mount of their own; the covers are never sized (they are
    // read-only) and, without sizes, nothing is.
    expect(pairIndex(a, '--perms', '0755', '--size', String(64 * 1024), '--tmpfs', '/dev/pts')).toBeGreaterThan(
      pairIndex(a, '--tmpfs', '/dev'),
    );
    expect(a.filter((x) => x === '--size')).toHaveLength(5);
    expect(args).not.toContain('--size');
  });

  it('remounts /dev and every cover read-only once everything inside them is mounted', () => {
    const a = buildBwrapArgs({ ...base, hidePaths: ['/srv/state'], roBindPaths: ['/home/me/.nvm/v20'], hideVarRun: true });
    const lastMount = Math.max(
      pairIndex(a, '--ro-bind', '/home/me/.nvm/v20', '/home/me/.nvm/v20'),
      pairIndex(a, '--perms', '1777', '--tmpfs', '/dev/shm'),
      pairIndex(a, '--symlink', '/proc/self/fd/2', '/dev/stderr'),
      pairIndex(a, '--dev-bind', '/dev/tty', '/dev/tty'),
    );
    for (const p of ['/dev', '/home', '/root', '/run', '/var/run', '/srv/state']) {
      expect(pairIndex(a, '--remount-ro', p)).toBeGreaterThan(lastMount);
    }
    // The writable mounts stay writable.
    for (const p of ['/home/user', '/tmp', '/var/tmp', '/dev/shm', '/dev/pts']) expect(pairIndex(a, '--remount-ro', p)).toBe(-1);
  });
});
