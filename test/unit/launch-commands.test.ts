// The command lines that launch a local sandbox and enter it (setpriv, nsenter, cgroups), and
// the sandbox user's passwd and PATH: pure builders.
import { describe, expect, it } from 'vitest';
import { buildEnterCommand, buildLaunchCommand, type Identity, type ToolPaths } from '../../host/providers/local/launch/command-lines.js';
import { groupFile, passwdFile } from '../../host/providers/local/launch/passwd.js';
import { sandboxPath } from '../../host/providers/local/launch/environment.js';

const tools: ToolPaths = { bwrap: '/usr/bin/bwrap', nsenter: '/usr/bin/nsenter', setpriv: '/usr/bin/setpriv', sh: '/bin/sh' };

const root: Identity = { uid: 65534, gid: 65534, dropPrivileges: true };

const user: Identity = { uid: 1000, gid: 1000, dropPrivileges: false };

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
