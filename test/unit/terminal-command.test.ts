// The pure builders of a local terminal: the host-side command (inherited descriptors closed
// first, the privilege drop by setpriv, exec's very enter command) and the in-sandbox prelude.
// test/e2e/shell.test.ts runs them for real.
import { describe, expect, it } from 'vitest';
import { buildEnterCommand, dropWithSetpriv, type Identity, type ToolPaths } from '../../host/providers/local/launch/command-lines.js';
import {
  buildTerminalCommand,
  closeFdsScript,
  TERMINAL_ENV_VAR,
  TERMINAL_PRELUDE,
} from '../../host/providers/local/launch/terminal-command.js';

const tools: ToolPaths = { bwrap: '/usr/bin/bwrap', nsenter: '/usr/bin/nsenter', setpriv: '/usr/bin/setpriv', sh: '/bin/sh' };
const root: Identity = { uid: 65534, gid: 65534, dropPrivileges: true };
const user: Identity = { uid: 1000, gid: 1000, dropPrivileges: false };
const base = {
  pid1: 42,
  tools,
  cgroupProcsFiles: [] as string[],
  network: 'isolated' as const,
  sandboxShell: '/bin/bash',
  hostShell: '/bin/bash',
  inheritedFds: [] as number[],
};

describe('dropWithSetpriv', () => {
  it('moves a spawn-time drop into setpriv (which also clears supplementary groups)', () => {
    const enter = buildEnterCommand(42, ['true'], root, tools);
    expect(enter.uid).toBe(65534);
    const dropped = dropWithSetpriv(enter, tools);
    expect(dropped.uid).toBeUndefined();
    expect(dropped.gid).toBeUndefined();
    expect(dropped.file).toBe('/usr/bin/setpriv');
    expect(dropped.args.slice(0, 3)).toEqual(['--reuid=65534', '--regid=65534', '--clear-groups']);
    expect(dropped.args).toContain('--bounding-set=-all');
    expect(dropped.args.slice(dropped.args.indexOf('/usr/bin/nsenter'))).toEqual([enter.file, ...enter.args]);
  });

  it('leaves a command that drops nothing unchanged', () => {
    const enter = buildEnterCommand(42, ['true'], user, tools);
    expect(dropWithSetpriv(enter, tools)).toEqual(enter);
  });
});

describe('buildTerminalCommand', () => {
  it('enters exactly as exec does, running the prelude and then an interactive shell', () => {
    const cmd = buildTerminalCommand({ ...base, identity: user });
    const inner = ['/bin/bash', '-c', TERMINAL_PRELUDE, '/bin/bash', '/bin/bash', '-i'];
    expect(cmd).toEqual(buildEnterCommand(42, inner, user, tools, [], 'isolated'));
  });

  it('runs the entry prelude (the sandbox limits) inside before anything else', () => {
    const cmd = buildTerminalCommand({ ...base, identity: user, entry: 'ulimit -S -u 9; ' });
    expect(cmd.args).toContain('ulimit -S -u 9; ' + TERMINAL_PRELUDE);
  });

  it('runs a given program instead, argv untouched', () => {
    const cmd = buildTerminalCommand({ ...base, identity: user, command: ['ls', '-la', 'a b'] });
    expect(cmd.args.slice(-4)).toEqual(['/bin/bash', 'ls', '-la', 'a b']);
  });

  it('as root: no spawn-time drop, setpriv in front; in cgroups: the join first, as exec', () => {
    const cmd = buildTerminalCommand({ ...base, identity: root });
    expect(cmd.uid).toBeUndefined();
    expect(cmd.file).toBe('/usr/bin/setpriv');
    const inCgroups = buildTerminalCommand({ ...base, identity: root, cgroupProcsFiles: ['/sys/fs/cgroup/pids/x/cgroup.procs'] });
    const inner = ['/bin/bash', '-c', TERMINAL_PRELUDE, '/bin/bash', '/bin/bash', '-i'];
    expect(inCgroups).toEqual(buildEnterCommand(42, inner, root, tools, ['/sys/fs/cgroup/pids/x/cgroup.procs'], 'isolated'));
  });

  it('closes inherited descriptors on the host side, before anything enters the sandbox', () => {
    const cmd = buildTerminalCommand({ ...base, identity: user, inheritedFds: [5, 251] });
    expect(cmd.file).toBe('/bin/bash');
    expect(cmd.args[0]).toBe('-c');
    expect(cmd.args[1]).toBe('exec 5>&-; exec 251>&-; exec "$@"');
    expect(cmd.args.slice(3, 4)).toEqual(['/usr/bin/nsenter']);
  });
});

describe('closeFdsScript', () => {
  it('refuses what a shell other than bash cannot close', () => {
    expect(closeFdsScript([3, 9], '/bin/sh')).toBe('exec 3>&-; exec 9>&-; exec "$@"');
    expect(() => closeFdsScript([12], '/bin/sh')).toThrow(
      expect.objectContaining({ category: 'unsupported', code: 'inherited_descriptors' }),
    );
  });
});

describe('TERMINAL_PRELUDE', () => {
  it('sources the environment last, then execs the program', () => {
    expect(TERMINAL_PRELUDE.endsWith(`eval "$${TERMINAL_ENV_VAR}"; unset ${TERMINAL_ENV_VAR}; exec "$@"`)).toBe(true);
    expect(TERMINAL_PRELUDE.indexOf('eval')).toBeGreaterThan(TERMINAL_PRELUDE.indexOf('ln -sfn'));
  });
});
