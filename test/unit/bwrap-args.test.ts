// The bwrap argv of a local sandbox, a pure builder asserted by position.
import { describe, expect, it } from 'vitest';
import { AGENT_RUNTIME_DIR } from '../../shared/agent-runtime.js';
import {
  buildBwrapArgs,
  buildTemplateBwrapArgs,
  PID1_SCRIPT,
  WORKSPACE_BASE_VIEW,
  WORKSPACE_PATH,
  WORKSPACE_UPPER_VIEW,
} from '../../host/providers/local/launch/bwrap-args.js';
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

  it("shows the host's system directories read-only, not its root: merged /usr links as links, a fresh /proc and a minimal /dev", () => {
    const a = buildBwrapArgs({
      ...base,
      systemDirs: [{ path: '/usr' }, { path: '/bin', link: 'usr/bin' }, { path: '/lib64' }],
      etcDir: '/c/etc',
    });
    expect(pairIndex(a, '--ro-bind', '/', '/')).toBe(-1);
    expect(pairIndex(a, '--ro-bind', '/usr', '/usr')).toBeGreaterThanOrEqual(0);
    expect(pairIndex(a, '--symlink', 'usr/bin', '/bin')).toBeGreaterThan(0);
    expect(pairIndex(a, '--ro-bind', '/lib64', '/lib64')).toBeGreaterThan(0);
    expect(pairIndex(a, '--ro-bind', '/c/etc', '/etc')).toBeGreaterThan(0);
    // Only what it is given: no host /opt, /srv, /home or /etc of its own.
    expect(a.filter((x) => x === '--ro-bind')).toHaveLength(3);
    expect(pairIndex(a, '--proc', '/proc')).toBeGreaterThan(0);
    expect(pairIndex(a, '--tmpfs', '/dev')).toBeGreaterThan(0);
    expect(pairIndex(a, '--dev-bind', '/dev/null', '/dev/null')).toBeGreaterThan(pairIndex(a, '--tmpfs', '/dev'));
    expect(pairIndex(args, '--json-status-fd', '3')).toBeGreaterThanOrEqual(0);
  });

  it('gives private /home/user (0700), /tmp and /var/tmp (1777) and its own passwd and group, in a root that ends read-only', () => {
    expect(pairIndex(args, '--perms', '0700', '--tmpfs', '/home/user')).toBeGreaterThan(0);
    expect(pairIndex(args, '--perms', '1777', '--tmpfs', '/tmp')).toBeGreaterThan(0);
    expect(pairIndex(args, '--perms', '1777', '--tmpfs', '/var/tmp')).toBeGreaterThan(0);
    expect(pairIndex(args, '--ro-bind-data', '5', '/etc/passwd')).toBeGreaterThan(0);
    expect(pairIndex(args, '--ro-bind-data', '6', '/etc/group')).toBeGreaterThan(0);
    expect(pairIndex(args, '--remount-ro', '/')).toBeGreaterThan(pairIndex(args, '--ro-bind-data', '6', '/etc/group'));
    expect(pairIndex(args, '--chdir', '/home/user')).toBeGreaterThan(pairIndex(args, '--remount-ro', '/'));
  });

  it("binds the person's read-only paths and the agent's runtime, and covers the server's directories below them", () => {
    const a = buildBwrapArgs({ ...base, roBindPaths: ['/srv/data'], hidePaths: ['/srv/data/state'], runtimeDir: '/c/runtime/k' });
    const bind = pairIndex(a, '--ro-bind', '/srv/data', '/srv/data');
    expect(bind).toBeGreaterThan(0);
    expect(pairIndex(a, '--tmpfs', '/srv/data/state')).toBeGreaterThan(bind);
    expect(pairIndex(a, '--ro-bind', '/c/runtime/k', AGENT_RUNTIME_DIR)).toBeGreaterThan(0);
    expect(pairIndex(a, '--remount-ro', '/srv/data/state')).toBeGreaterThan(pairIndex(a, '--tmpfs', '/srv/data/state'));
  });

  it('sizes each writable tmpfs it is given a size for (the flag right before its --tmpfs)', () => {
    const sizes = writableMountSizes(64);
    const a = buildBwrapArgs({ ...base, mountSizes: sizes });
    const home = pairIndex(a, '--perms', '0700', '--size', String(28 * 1024 * 1024), '--tmpfs', '/home/user');
    expect(home).toBeGreaterThan(0);
    // The agent's state: a mount of its own inside the home (after it), which the home's files cannot fill.
    expect(
      pairIndex(a, '--perms', '0700', '--size', String(4 * 1024 * 1024), '--tmpfs', '/home/user/.local/state/sandbox-agent'),
    ).toBeGreaterThan(home);
    expect(pairIndex(a, '--perms', '1777', '--size', String(16 * 1024 * 1024), '--tmpfs', '/tmp')).toBeGreaterThan(0);
    for (const p of ['/var/tmp', '/dev/shm'])
      expect(pairIndex(a, '--perms', '1777', '--size', String(8 * 1024 * 1024), '--tmpfs', p)).toBeGreaterThan(0);
    // The terminal's links get a small mount of their own; the covers are never sized (they are
    // read-only) and, without sizes, nothing is.
    expect(pairIndex(a, '--perms', '0755', '--size', String(64 * 1024), '--tmpfs', '/dev/pts')).toBeGreaterThan(
      pairIndex(a, '--tmpfs', '/dev'),
    );
    expect(a.filter((x) => x === '--size')).toHaveLength(6);
    expect(args).not.toContain('--size');
  });

  it('remounts /dev, the covers and the root read-only once everything inside them is mounted', () => {
    const a = buildBwrapArgs({ ...base, roBindPaths: ['/srv/data'], hidePaths: ['/srv/data/state'], runtimeDir: '/c/runtime/k' });
    const lastMount = Math.max(
      pairIndex(a, '--ro-bind', '/c/runtime/k', AGENT_RUNTIME_DIR),
      pairIndex(a, '--perms', '1777', '--tmpfs', '/dev/shm'),
      pairIndex(a, '--symlink', '/proc/self/fd/2', '/dev/stderr'),
      pairIndex(a, '--dev-bind', '/dev/tty', '/dev/tty'),
    );
    for (const p of ['/dev', '/srv/data/state', '/']) expect(pairIndex(a, '--remount-ro', p)).toBeGreaterThan(lastMount);
    // The writable mounts stay writable.
    for (const p of ['/home/user', '/tmp', '/var/tmp', '/dev/shm', '/dev/pts']) expect(pairIndex(a, '--remount-ro', p)).toBe(-1);
  });
});

describe('buildTemplateBwrapArgs', () => {
  const template = { statusFd: 3, readyFd: 4, rootFd: 7, runtimeDir: '/c/runtime/k' };

  it("binds the launch helper's root as / and joins its user namespace (root server), commands root inside", () => {
    const a = buildTemplateBwrapArgs({ ...template, usernsFd: 8 });
    expect(pairIndex(a, '--bind-fd', '7', '/')).toBeGreaterThan(0);
    expect(pairIndex(a, '--userns', '8')).toBeGreaterThan(0);
    expect(a).not.toContain('--unshare-user');
    expect(pairIndex(a, '--uid', '0')).toBeGreaterThan(0);
    expect(pairIndex(a, '--gid', '0')).toBeGreaterThan(0);
    expect(a.slice(-4)).toEqual(['--', '/bin/sh', '-c', PID1_SCRIPT]);
  });

  it('makes its own user namespace and drops every capability there when the server is not root', () => {
    const a = buildTemplateBwrapArgs(template);
    expect(a).toContain('--unshare-user');
    expect(pairIndex(a, '--cap-drop', 'ALL')).toBeGreaterThan(0);
    expect(a).not.toContain('--userns');
  });

  it('keeps /proc/sys read-only (root inside could write its IPC sysctls) and sizes /dev/shm', () => {
    const a = buildTemplateBwrapArgs({ ...template, shmBytes: 8 * 1024 * 1024 });
    expect(pairIndex(a, '--ro-bind', '/proc/sys', '/proc/sys')).toBeGreaterThan(pairIndex(a, '--proc', '/proc'));
    expect(pairIndex(a, '--perms', '1777', '--size', String(8 * 1024 * 1024), '--tmpfs', '/dev/shm')).toBeGreaterThan(
      pairIndex(a, '--dev', '/dev'),
    );
    expect(pairIndex(a, '--remount-ro', '/dev')).toBeGreaterThan(pairIndex(a, '--tmpfs', '/dev/shm'));
  });

  it("gives the agent's state a sized mount of its own in the root, where the root's files cannot fill it", () => {
    const a = buildTemplateBwrapArgs({ ...template, agentStateBytes: 4 * 1024 * 1024 });
    const state = pairIndex(a, '--perms', '0700', '--size', String(4 * 1024 * 1024), '--tmpfs', '/home/user/.local/state/sandbox-agent');
    expect(state).toBeGreaterThan(pairIndex(a, '--bind-fd', '7', '/'));
    expect(state).toBeGreaterThan(pairIndex(a, '--dir', '/home/user'));
    expect(buildTemplateBwrapArgs(template)).not.toContain('/home/user/.local/state/sandbox-agent');
  });

  it("puts the agent's runtime on a read-only tmpfs of its own (a mount point cannot be renamed away)", () => {
    const a = buildTemplateBwrapArgs(template);
    const tmpfs = pairIndex(a, '--tmpfs', '/.sandbox-mcp');
    expect(tmpfs).toBeGreaterThan(0);
    expect(pairIndex(a, '--ro-bind', '/c/runtime/k', AGENT_RUNTIME_DIR)).toBeGreaterThan(tmpfs);
    expect(pairIndex(a, '--remount-ro', '/.sandbox-mcp')).toBeGreaterThan(pairIndex(a, '--ro-bind', '/c/runtime/k', AGENT_RUNTIME_DIR));
  });
});

describe('a workspace in the bwrap argv', () => {
  const ws = { merged: '/c/mnt/ws/merged', lower: '/c/mnt/ws/lower', upper: '/c/mnt/ws/upper' };

  it('binds the overlay writable at /workspace and its lower and upper read-only for the agent, after the writable mounts', () => {
    const a = buildBwrapArgs({ ...base, workspace: ws });
    const merged = pairIndex(a, '--bind', ws.merged, WORKSPACE_PATH);
    expect(merged).toBeGreaterThan(pairIndex(a, '--tmpfs', '/tmp'));
    expect(pairIndex(a, '--ro-bind', ws.lower, WORKSPACE_BASE_VIEW)).toBeGreaterThan(merged);
    expect(pairIndex(a, '--ro-bind', ws.upper, WORKSPACE_UPPER_VIEW)).toBeGreaterThan(merged);
    expect(buildBwrapArgs(base)).not.toContain(WORKSPACE_PATH);
  });

  it("in a template sandbox, puts the agent's views on the read-only /.sandbox-mcp tmpfs, before it is made read-only", () => {
    const a = buildTemplateBwrapArgs({ statusFd: 3, readyFd: 4, rootFd: 7, workspace: ws });
    const tmpfs = pairIndex(a, '--tmpfs', '/.sandbox-mcp');
    expect(tmpfs).toBeGreaterThan(0);
    expect(pairIndex(a, '--bind', ws.merged, WORKSPACE_PATH)).toBeGreaterThan(tmpfs);
    expect(pairIndex(a, '--remount-ro', '/.sandbox-mcp')).toBeGreaterThan(pairIndex(a, '--ro-bind', ws.upper, WORKSPACE_UPPER_VIEW));
  });
});
