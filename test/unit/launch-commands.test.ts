// The command lines that launch a local sandbox and enter it (setpriv, nsenter, cgroups), and
// the sandbox user's passwd and PATH: pure builders.
import { describe, expect, it } from 'vitest';
import {
  buildEnterCommand,
  buildLaunchCommand,
  buildTemplateLaunchCommand,
  TEMPLATE_COMMAND_CAPS,
  type Identity,
  type ToolPaths,
} from '../../host/providers/local/launch/command-lines.js';
import { perlCommand, SYSCALL_NUMBERS } from '../../host/providers/local/launch/perl-helpers.js';
import { groupFile, passwdFile } from '../../host/providers/local/launch/passwd.js';
import { sandboxPath } from '../../host/providers/local/launch/environment.js';

const tools: ToolPaths = {
  bwrap: '/usr/bin/bwrap',
  nsenter: '/usr/bin/nsenter',
  setpriv: '/usr/bin/setpriv',
  sh: '/bin/sh',
  perl: '/usr/bin/perl',
};

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

  it("runs a perl helper as `perl -e TEXT -- ARGS`, the architecture's system call numbers first", () => {
    const cmd = perlCommand('/usr/bin/perl', 'print 1;', 'x64', ['a', '-b']);
    expect(cmd.file).toBe('/usr/bin/perl');
    expect(cmd.args[0]).toBe('-e');
    expect(cmd.args[1]).toMatch(/^my %SYS = \(.*\bsetns => 308\b.*\);\nprint 1;$/);
    expect(cmd.args.slice(2)).toEqual(['--', 'a', '-b']);
    expect(perlCommand('/usr/bin/perl', '', 'arm64', []).args[1]).toMatch(/\bsetns => 268\b/);
    // Every architecture knows every call the helpers make.
    expect(Object.keys(SYSCALL_NUMBERS.arm64).sort()).toEqual(Object.keys(SYSCALL_NUMBERS.x64).sort());
  });

  it("launches a template sandbox through its helper, as the keeper's uid, with the sandbox's first id given to drop to", () => {
    const block: Identity = { uid: 0x71000000, gid: 0x71000000, dropPrivileges: true };
    const launch = { helper: { text: 'H', arch: 'x64' as const }, rwDir: '/s/rw', rootBytes: 7340032.5, layers: ['/t/l1', '/t/l0'] };
    const idrange = buildTemplateLaunchCommand(['--x'], { ...launch, mode: 'idrange', mountPoint: '/c/mnt' }, block, tools);
    expect(idrange.file).toBe('/usr/bin/perl');
    expect(idrange.uid).toBeUndefined();
    expect(idrange.args.slice(2)).toEqual([
      '--',
      '/s/rw',
      '/c/mnt',
      '7340032',
      'idrange',
      String(0x71000000),
      '/t/l1',
      '/t/l0',
      '--',
      '/usr/bin/bwrap',
      '--x',
    ]);
    const userns = buildTemplateLaunchCommand(['--x'], { ...launch, mode: 'userns' }, user, tools);
    expect(userns.args.slice(2, 8)).toEqual(['--', '/s/rw', '-', '7340032', 'userns', '0']);
  });

  it('launches a base sandbox with a workspace through the helper: drop to the sandbox uid as root, keep as a user; the directory and its owner last', () => {
    const launch = { helper: { text: 'H', arch: 'x64' as const }, rwDir: '/s/rw', rootBytes: 3 * 1024 * 1024, layers: [] };
    const workspace = { dir: '/home/alice/app', uid: 1000, gid: 100 };
    // A configured group that differs from the uid is passed as UID:GID.
    const drop = buildTemplateLaunchCommand(
      ['--x'],
      { ...launch, mode: 'drop', mountPoint: '/c/mnt', workspace },
      { ...root, gid: 4242 },
      tools,
    );
    expect(drop.uid).toBeUndefined();
    // prettier-ignore
    expect(drop.args.slice(2)).toEqual([
      '--', '/s/rw', '/c/mnt', String(3 * 1024 * 1024), 'drop', `${root.uid}:4242`,
      '--workspace', '/home/alice/app', '1000', '100', '--', '/usr/bin/bwrap', '--x',
    ]);
    // An image's user (idrange): the workspace shown as its ids inside, after the directory and its owner.
    const asUser = buildTemplateLaunchCommand(
      ['--x'],
      { ...launch, mode: 'idrange', layers: ['/l'], workspace: { ...workspace, inside: { uid: 1000, gid: 1001 } } },
      root,
      tools,
    );
    expect(asUser.args.slice(9)).toEqual([
      '--workspace',
      '/home/alice/app',
      '1000',
      '100',
      '--workspace-as',
      '1000:1001',
      '--',
      '/usr/bin/bwrap',
      '--x',
    ]);
    const keep = buildTemplateLaunchCommand(['--x'], { ...launch, mode: 'keep', workspace }, user, tools);
    expect(keep.args.slice(2, 11)).toEqual([
      '--',
      '/s/rw',
      '-',
      String(3 * 1024 * 1024),
      'keep',
      '0',
      '--workspace',
      '/home/alice/app',
      '1000',
    ]);
  });

  it('enters a template sandbox through its entry helper (never nsenter), keeping only the chosen capabilities', () => {
    const block: Identity = { uid: 0x71000000, gid: 0x71000000, dropPrivileges: true };
    const template = { helper: { text: 'E', arch: 'x64' as const }, keepCaps: TEMPLATE_COMMAND_CAPS.idrange };
    const cmd = buildEnterCommand(4242, ['/bin/sh', '-c', 'true'], block, tools, [], 'isolated', template);
    expect(cmd.file).toBe('/usr/bin/perl');
    expect(cmd.args.slice(2)).toEqual(['--', '4242', '1', 'a00405fb', '-', '--', '/bin/sh', '-c', 'true']);
    expect([cmd.uid, cmd.gid]).toEqual([0x71000000, 0x71000000]);
    // An image's user: the helper's child switches to its ids inside (the host-side process stays the block's first id).
    const asUser = buildEnterCommand(4242, ['true'], block, tools, [], 'isolated', { ...template, runAs: { uid: 1000, gid: 1001 } });
    expect(asUser.args.slice(2, 8)).toEqual(['--', '4242', '1', 'a00405fb', '1000:1001', '--']);
    expect([asUser.uid, asUser.gid]).toEqual([0x71000000, 0x71000000]);
    expect(buildEnterCommand(4242, ['true'], block, tools, [], 'host', template).args.slice(3, 5)).toEqual(['4242', '0']);
    // CAP_SYS_ADMIN (21), CAP_SYS_RESOURCE (24), CAP_NET_ADMIN (12), CAP_SYS_PTRACE (19) and CAP_MKNOD (27) stay out.
    for (const cap of [21, 24, 12, 19, 27]) expect(BigInt('0x' + TEMPLATE_COMMAND_CAPS.idrange) & (1n << BigInt(cap))).toBe(0n);
    expect(TEMPLATE_COMMAND_CAPS.userns).toBe('0');
  });
});
