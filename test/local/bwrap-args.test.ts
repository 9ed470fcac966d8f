// Unit tests of the pure parts of the local provider: argv builders, ids, paths, parsers.
import { describe, expect, it } from 'vitest';
import { buildBwrapArgs, PID1_SCRIPT } from '../../host/providers/local/launch/bwrap-args.js';
import { buildEnterCommand, buildLaunchCommand, type Identity, type ToolPaths } from '../../host/providers/local/launch/command-lines.js';
import { groupFile, passwdFile } from '../../host/providers/local/launch/passwd.js';
import { sandboxPath } from '../../host/providers/local/launch/environment.js';
import { fileStatusError, FILE_STATUS, parseListing } from '../../host/providers/local/files/scripts.js';
import { coverInherited } from '../../host/providers/local/system/inherited-fds.js';
import { classifyBwrapFailure } from '../../host/providers/local/keeper/bwrap-process.js';
import { writableMountSizes } from '../../host/providers/local/limits/disk-shares.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { defaultStateDir } from '../../host/providers/local/sandbox/state-dir.js';
import { isSandboxId, newSandboxId, newSandboxUid, SANDBOX_UID_BASE, SANDBOX_UID_COUNT } from '../../host/providers/local/sandbox/ids.js';
import { specNetwork, type SandboxSpec } from '../../host/providers/local/sandbox/spec.js';

const tools: ToolPaths = { bwrap: '/usr/bin/bwrap', nsenter: '/usr/bin/nsenter', setpriv: '/usr/bin/setpriv', sh: '/bin/sh' };
const root: Identity = { uid: 65534, gid: 65534, dropPrivileges: true };
const user: Identity = { uid: 1000, gid: 1000, dropPrivileges: false };
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

describe('launch and enter commands', () => {
  it('as root, bwrap runs under setpriv with no capabilities', () => {
    const cmd = buildLaunchCommand(['--x'], root, tools);
    expect(cmd.file).toBe('/usr/bin/setpriv');
    expect(cmd.args).toEqual(
      expect.arrayContaining([
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        '--inh-caps=-all',
        '--bounding-set=-all',
        '--no-new-privs',
      ]),
    );
    expect(cmd.args.slice(-2)).toEqual(['/usr/bin/bwrap', '--x']);
    // bwrap and pid 1 start outside the sandbox's cgroups (no join script): commands join as they enter.
    expect(buildLaunchCommand(['--x'], user, tools)).toEqual({ file: '/usr/bin/bwrap', args: ['--x'] });
  });

  it('enters every namespace with preserved credentials, dropping to the sandbox uid as root', () => {
    const cmd = buildEnterCommand(4242, ['/bin/bash', '-c', 'true'], root, tools);
    expect(cmd.file).toBe('/usr/bin/nsenter');
    expect(cmd.args).toEqual([
      '-t',
      '4242',
      '--preserve-credentials',
      '-U',
      '-p',
      '-m',
      '-i',
      '-u',
      '-n',
      '-r',
      '-w',
      '--',
      '/bin/bash',
      '-c',
      'true',
    ]);
    // A sandbox sharing the host's network has no namespace of its own to enter (and may not enter the host's).
    const shared = buildEnterCommand(4242, ['true'], root, tools, [], 'host');
    expect(shared.args).toEqual(['-t', '4242', '--preserve-credentials', '-U', '-p', '-m', '-i', '-u', '-r', '-w', '--', 'true']);
    expect(buildEnterCommand(4242, ['true'], root, tools, [], 'isolated').args).toContain('-n');
    expect(cmd.uid).toBe(65534);
    expect(cmd.gid).toBe(65534);
    const asUser = buildEnterCommand(4242, ['true'], user, tools);
    expect(asUser.uid).toBeUndefined();
    // With a cgroup, root joins it first (cgroup v2 requires it), then setpriv drops everything before nsenter.
    const limited = buildEnterCommand(4242, ['true'], root, tools, ['/cg/m/cgroup.procs']);
    expect(limited.file).toBe('/bin/sh');
    expect(limited.uid).toBeUndefined();
    const rest = limited.args.slice(limited.args.indexOf('--') + 1);
    expect(rest.slice(0, 7)).toEqual([
      '/usr/bin/setpriv',
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--no-new-privs',
    ]);
    expect(rest[7]).toBe('/usr/bin/nsenter');
    const limitedUser = buildEnterCommand(4242, ['true'], user, tools, ['/cg/m/cgroup.procs']);
    expect(limitedUser.args).not.toContain('/usr/bin/setpriv');
    expect(limitedUser.uid).toBeUndefined();
  });

  it('names the sandbox uid "user" and gives a sane PATH', () => {
    expect(passwdFile(root, '/bin/bash')).toContain('user:x:65534:65534:user:/home/user:/bin/bash');
    expect(groupFile(root)).toContain('user:x:65534:');
    // Unmapped host owners (root's files) show as the overflow id: named nobody, never `user`.
    const own: Identity = { uid: 0x7000_1234, gid: 0x7000_1234, dropPrivileges: true };
    expect(
      passwdFile(own, '/bin/bash')
        .split('\n')
        .filter((l) => l.includes(':65534:')),
    ).toEqual(['nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin']);
    expect(groupFile(own)).toContain('nogroup:x:65534:');
    expect(passwdFile(root, '/bin/bash')).not.toContain('nobody');
    expect(sandboxPath(['/usr/bin', '/opt/node/bin'])).toBe('/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/node/bin');
  });
});

describe('ids and state paths', () => {
  it('gives per-sandbox uids from the unassigned range, never one already taken', () => {
    const taken = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const uid = newSandboxUid(taken);
      expect(taken.has(uid)).toBe(false);
      expect(uid).toBeGreaterThanOrEqual(SANDBOX_UID_BASE);
      expect(uid).toBeLessThan(Math.min(SANDBOX_UID_BASE + SANDBOX_UID_COUNT, 0x7ffe_0000));
      taken.add(uid);
    }
  });

  it('makes short, random, url-safe ids and rejects anything else', () => {
    const ids = new Set(Array.from({ length: 200 }, () => newSandboxId()));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]{12}$/);
    for (const bad of ['', '../../etc/x', 'ABCDEFGHIJKL', 'abc', 'abcdefghijk/', '.gone-abcdefghijkl'])
      expect(isSandboxId(bad)).toBe(false);
  });

  it("reads the network a sandbox was made with: specs from before the option shared the host's", () => {
    const spec = { version: 1, id: 'abcdefghijkl' } as SandboxSpec;
    expect(specNetwork(spec)).toBe('host');
    expect(specNetwork({ ...spec, network: 'host' })).toBe('host');
    expect(specNetwork({ ...spec, network: 'isolated' })).toBe('isolated');
    // Anything else fails closed.
    expect(specNetwork({ ...spec, network: 'bogus' as never })).toBe('isolated');
    expect(() => createLocalProvider({ stateDir: '/nonexistent', network: 'bridge' as never })).toThrow(
      expect.objectContaining({ category: 'invalid_argument' }),
    );
  });

  it('resolves the state directory from the environment in order', () => {
    expect(defaultStateDir({ SANDBOX_MCP_STATE_DIR: '/s', XDG_STATE_HOME: '/x' })).toBe('/s');
    expect(defaultStateDir({ XDG_STATE_HOME: '/x' })).toBe('/x/sandbox-mcp');
    expect(defaultStateDir({ XDG_STATE_HOME: 'relative' })).toMatch(/\/\.local\/state\/sandbox-mcp$/);
  });
});

describe('file helpers', () => {
  it('maps script statuses to fixed categories', () => {
    expect(fileStatusError(0)).toBeNull();
    expect(fileStatusError(FILE_STATUS.notFound)?.category).toBe('not_found');
    expect(fileStatusError(FILE_STATUS.isDirectory)?.category).toBe('invalid_argument');
    expect(fileStatusError(FILE_STATUS.permission)?.category).toBe('permission_denied');
    expect(fileStatusError(FILE_STATUS.noSpace)?.category).toBe('insufficient_resources');
    expect(fileStatusError(1)?.category).toBe('internal');
  });

  it('parses listings, including names with tabs', () => {
    const out = Buffer.from('d\t60\t1700000000.5\t/home/user/b\0f\t3\t1700000001.0\t/home/user/a\tb\0l\t4\tx\t/home/user/c\0');
    expect(parseListing(out)).toEqual([
      { name: 'a\tb', path: '/home/user/a\tb', type: 'file', size: 3, modified_at: '2023-11-14T22:13:21.000Z' },
      { name: 'b', path: '/home/user/b', type: 'directory', size: 60, modified_at: '2023-11-14T22:13:20.500Z' },
      { name: 'c', path: '/home/user/c', type: 'symlink', size: 4, modified_at: null },
    ]);
  });
});

describe('classifyBwrapFailure', () => {
  it('tells refused user namespaces from AppArmor and other failures', () => {
    expect(classifyBwrapFailure('bwrap: setting up uid map: Permission denied', 1)).toBe('userns_apparmor');
    expect(classifyBwrapFailure('bwrap: Creating new namespace failed: No space left on device', 1)).toBe('userns_refused');
    expect(classifyBwrapFailure('bwrap: No permissions to creating new namespace', 1)).toBe('userns_refused');
    expect(classifyBwrapFailure('', 125)).toBe('cgroup_unavailable');
    expect(classifyBwrapFailure("bwrap: Can't mount proc", 1)).toBe('bwrap_failed');
  });
});

describe('coverInherited', () => {
  it('puts /dev/null over inherited descriptors, never over our own pipes', () => {
    expect(coverInherited(['ignore', 'pipe', 'pipe', 'pipe'], { fds: [3, 6], devNullFd: 42 })).toEqual([
      'ignore',
      'pipe',
      'pipe',
      'pipe',
      'ignore',
      'ignore',
      42,
    ]);
    expect(coverInherited(['ignore', 'pipe', 'pipe', 'ignore'], { fds: [3], devNullFd: 42 })).toEqual(['ignore', 'pipe', 'pipe', 42]);
    expect(coverInherited(['ignore', 'pipe', 'pipe'])).toEqual(['ignore', 'pipe', 'pipe']);
  });
});
