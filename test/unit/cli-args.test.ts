// The command line: every mistake is named (an unknown option, a flag given to a command it does
// not apply to, a missing value) without echoing a value; defaults match the help text.
import { mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { HELP, OPTIONS, parseCommandLine } from '../../host/cli/args.js';
import { ConfigError, loadConfig } from '../../host/config/config.js';
import { isDebugOn } from '../../host/util/log.js';
import { usageError } from '../support/usage-error.js';

describe('parseCommandLine', () => {
  it('serves stdio by default, with the documented defaults', () => {
    expect(parseCommandLine([])).toMatchObject({
      command: 'stdio',
      args: [],
      keepSandboxes: false,
      host: '127.0.0.1',
      port: 8765,
      idleTimeoutS: 1800,
      allowedHosts: [],
      json: false,
    });
    expect(parseCommandLine(['--keep-sandboxes', '--provider', 'e2b'])).toMatchObject({
      command: 'stdio',
      keepSandboxes: true,
      provider: 'e2b',
    });
  });

  it('reads http options, repeated and comma-separated --allowed-host included', () => {
    const line = parseCommandLine([
      'http',
      '--port',
      '0',
      '--host=::1',
      '--idle-timeout',
      '60',
      '--allowed-host',
      'a.example,b.example',
      '--allowed-host=c:9',
    ]);
    expect(line).toMatchObject({
      command: 'http',
      port: 0,
      host: '::1',
      idleTimeoutS: 60,
      allowedHosts: ['a.example', 'b.example', 'c:9'],
    });
    expect(parseCommandLine(['http', '--allowed-host', 'my_box.lan,10.0.0.5:8765,[fd00::1]:80']).allowedHosts).toEqual([
      'my_box.lan',
      '10.0.0.5:8765',
      '[fd00::1]:80',
    ]);
  });

  it('takes an IPv6 --host with or without the brackets a URL puts around it, and brackets around nothing else', () => {
    expect(parseCommandLine(['http', '--host', '[::1]']).host).toBe('::1');
    expect(parseCommandLine(['http', '--host=[fd00::1]']).host).toBe('fd00::1');
    expect(parseCommandLine(['http', '--host', '::1']).host).toBe('::1');
    for (const bad of ['[zzq.example]', '[127.0.0.1]', '[]']) {
      expect(usageError(['http', '--host', bad]), bad).toBe('--host: only an IPv6 address goes in brackets');
    }
  });

  it('refuses an --allowed-host item no Host header could name, by position, never quoting it', () => {
    // A URL, a path, a space, an empty or out-of-range port: each would be kept and never match, every client refused with 403.
    for (const bad of [
      'http://zzq.example',
      'zzq.example/mcp',
      'zzq example',
      'zzq.example:',
      'zzq.example:70000',
      'zzq.example:0',
      '[zzq]',
    ]) {
      const message = usageError(['http', '--allowed-host', `ok.example,${bad}`]);
      expect(message, bad).toBe('--allowed-host: item 2 is not a host name, IPv4 or [IPv6] address with an optional :port');
    }
  });

  it('reads the dashboard command (a free port unless --port) and --no-dashboard for http only', () => {
    expect(parseCommandLine(['dashboard'])).toMatchObject({ command: 'dashboard', port: 0 });
    expect(parseCommandLine(['dashboard', '--port', '8766', '--provider', 'e2b'])).toMatchObject({ port: 8766, provider: 'e2b' });
    expect(parseCommandLine(['http'])).toMatchObject({ port: 8765, noDashboard: false });
    expect(parseCommandLine(['http', '--no-dashboard'])).toMatchObject({ noDashboard: true });
    expect(usageError(['dashboard', '--no-dashboard'])).toBe('--no-dashboard applies only to: sandbox-mcp http');
    expect(usageError(['dashboard', '--host', '0.0.0.0'])).toBe('--host applies only to: sandbox-mcp http');
    expect(usageError(['dashboard', 'x'])).toBe('dashboard takes no arguments (usage: sandbox-mcp dashboard [--port N])');
  });

  it('names an unknown option, long or short, and never echoes its value', () => {
    expect(usageError(['--foo'])).toBe('unknown option --foo (see sandbox-mcp --help)');
    expect(usageError(['http', '-x'])).toBe('unknown option -x (see sandbox-mcp --help)');
    const message = usageError(['--token=hunter2-secret-value']);
    expect(message).toContain('--token');
    expect(message).not.toContain('hunter2');
    expect(usageError(['--\u001b[31mred'])).toBe('unknown option (see sandbox-mcp --help)');
  });

  it('refuses http-only flags without http, naming the flag and where it applies', () => {
    expect(usageError(['--port', '8000'])).toBe('--port applies only to: sandbox-mcp http, sandbox-mcp dashboard');
    expect(usageError(['doctor', '--host', '0.0.0.0'])).toBe('--host applies only to: sandbox-mcp http');
    expect(usageError(['--idle-timeout', '5'])).toContain('--idle-timeout applies only to');
    expect(usageError(['--allowed-host', 'x'])).toContain('--allowed-host applies only to');
    expect(usageError(['--json'])).toBe(
      '--json applies only to: sandbox-mcp doctor, sandbox-mcp ls, sandbox-mcp logs, sandbox-mcp kill, sandbox-mcp cancel, sandbox-mcp template, sandbox-mcp snapshot, sandbox-mcp diff, sandbox-mcp apply',
    );
    expect(usageError(['doctor', '--keep-sandboxes'])).toBe('--keep-sandboxes applies only to: sandbox-mcp, sandbox-mcp http');
  });

  it('names a missing value, a value given to a switch, a repeated option and a bad number', () => {
    expect(usageError(['http', '--port'])).toBe('--port needs a value');
    expect(usageError(['--version=1'])).toBe('--version takes no value');
    expect(usageError(['http', '--port', '1', '--port', '2'])).toBe('--port is given more than once');
    expect(usageError(['http', '--port', '70000'])).toBe('--port must be an integer 0-65535');
    expect(usageError(['http', '--port', ''])).toBe('--port must be an integer 0-65535');
    expect(usageError(['http', '--idle-timeout', '0'])).toContain('--idle-timeout must be an integer');
    // Decimal digits only, as every limit flag takes them (Number() alone would read these).
    for (const value of ['1e3', '0x10', ' 80', '80.0', '+80']) {
      expect(usageError(['http', '--port', value]), value).toBe('--port must be an integer 0-65535');
      expect(usageError(['http', '--idle-timeout', value]), value).toContain('--idle-timeout must be an integer');
      expect(usageError(['logs', 'local:abc', 'a'.repeat(32), '--from', value]), value).toContain('--from must be an integer');
    }
  });

  it('names an unknown command only when it looks like one, and checks each command`s arguments', () => {
    expect(usageError(['docter'])).toBe('unknown command "docter" (see sandbox-mcp --help)');
    expect(usageError(['rm -rf /'])).toBe('unknown command (see sandbox-mcp --help)');
    expect(usageError(['http', 'extra'])).toBe('http takes no arguments (usage: sandbox-mcp http [options])');
    expect(usageError(['agent', 'abc'])).toBe('usage: sandbox-mcp agent <sandbox_id> <op> [json]');
    expect(usageError(['selftest'])).toBe('usage: sandbox-mcp selftest <sandbox_id>');
    expect(parseCommandLine(['agent', 'local:abc', 'get', '{}'])).toMatchObject({ command: 'agent', args: ['local:abc', 'get', '{}'] });
    expect(parseCommandLine(['doctor', '--json'])).toMatchObject({ command: 'doctor', json: true });
  });

  it('reads the network flags for the serving commands and `network`, and nowhere else', () => {
    expect(parseCommandLine([])).toMatchObject({ networkAllow: [] });
    expect(
      parseCommandLine(['--network-allow', 'pypi.org,@packages', '--network-allow=x.test', '--network-default', 'allowed']),
    ).toMatchObject({
      command: 'stdio',
      networkAllow: ['pypi.org,@packages', 'x.test'],
      networkDefault: 'allowed',
    });
    expect(parseCommandLine(['network', 'local:abc', '--network-allow', 'x.test'])).toMatchObject({
      command: 'network',
      args: ['local:abc'],
    });
    expect(parseCommandLine(['network'])).toMatchObject({ command: 'network', args: [] });
    expect(usageError(['network', 'a', 'b'])).toBe('usage: sandbox-mcp network [sandbox_id]');
    expect(usageError(['doctor', '--network-default', 'none'])).toBe(
      '--network-default applies only to: sandbox-mcp, sandbox-mcp http, sandbox-mcp network',
    );
    expect(usageError(['--network-default', 'a', '--network-default', 'b'])).toBe('--network-default is given more than once');
  });

  it('reads diff and apply, with --worktree for apply only', () => {
    expect(parseCommandLine(['diff', 'local:abc', '--json'])).toMatchObject({
      command: 'diff',
      args: ['local:abc'],
      json: true,
      worktree: false,
    });
    expect(parseCommandLine(['apply', 'local:abc', '--worktree'])).toMatchObject({ command: 'apply', args: ['local:abc'], worktree: true });
    expect(usageError(['diff', 'local:abc', '--worktree'])).toBe('--worktree applies only to: sandbox-mcp apply');
    expect(usageError(['apply'])).toBe('usage: sandbox-mcp apply <sandbox_id> [--worktree] [--json]');
  });

  it('reads --workspace-allow for the serving commands only', () => {
    expect(parseCommandLine([])).toMatchObject({ workspaceAllow: [] });
    expect(parseCommandLine(['http', '--workspace-allow', '/a,/b', '--workspace-allow=/c'])).toMatchObject({
      command: 'http',
      workspaceAllow: ['/a,/b', '/c'],
    });
    expect(usageError(['ls', '--workspace-allow', '/a'])).toBe('--workspace-allow applies only to: sandbox-mcp, sandbox-mcp http');
  });

  it('reads the template and snapshot commands and their flags, and nowhere else', () => {
    expect(
      parseCommandLine(['template', 'build', 'py', '--packages', 'python3,git', '--suite', 'trixie', '--package-cache', '/var/cache/x']),
    ).toMatchObject({
      command: 'template',
      args: ['build', 'py'],
      packages: 'python3,git',
      suite: 'trixie',
      packageCache: '/var/cache/x',
    });
    expect(parseCommandLine(['template', 'import', 'mini', '/tmp/r.tar', '--template-dir', '/srv/t'])).toMatchObject({
      args: ['import', 'mini', '/tmp/r.tar'],
      templateDir: '/srv/t',
    });
    expect(parseCommandLine(['snapshot', 'local:abc', 'snap', '--max-snapshot-storage', '100'])).toMatchObject({
      command: 'snapshot',
      args: ['local:abc', 'snap'],
      maxSnapshotStorage: '100',
    });
    expect(parseCommandLine(['http', '--template-dir', '/srv/t', '--max-snapshot-storage', '0'])).toMatchObject({
      templateDir: '/srv/t',
      maxSnapshotStorage: '0',
    });
    expect(usageError(['--packages', 'git'])).toBe('--packages applies only to: sandbox-mcp template');
    expect(usageError(['ls', '--template-dir', '/t'])).toBe(
      '--template-dir applies only to: sandbox-mcp, sandbox-mcp http, sandbox-mcp doctor, sandbox-mcp template, sandbox-mcp snapshot',
    );
    expect(usageError(['snapshot', 'local:abc'])).toBe('usage: sandbox-mcp snapshot <sandbox_id> NAME [--keep-apt-cache] [--json]');
    expect(parseCommandLine(['snapshot', 'local:abc', 'snap', '--keep-apt-cache'])).toMatchObject({ keepAptCache: true });
    expect(parseCommandLine(['snapshot', 'local:abc', 'snap'])).toMatchObject({ keepAptCache: false });
    expect(usageError(['template', 'ls', '--keep-apt-cache'])).toBe('--keep-apt-cache applies only to: sandbox-mcp snapshot');
    expect(usageError(['template', 'import', 'a', 'b', 'c'])).toContain('usage: sandbox-mcp template');
  });

  it('--sandbox-ro-bind is repeatable (or SANDBOX_MCP_SANDBOX_RO_BIND, colon-separated): absolute existing paths, never the root, refused naming the item', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ro-bind-'));
    const link = join(dir, 'link');
    symlinkSync(dir, link);
    try {
      const line = parseCommandLine(['http', '--sandbox-ro-bind', dir, '--sandbox-ro-bind', '/usr/share']);
      expect(line.sandboxRoBinds).toEqual([dir, '/usr/share']);
      expect(loadConfig({}, { sandboxRoBinds: line.sandboxRoBinds }).sandboxRoBinds).toEqual([realpathSync(dir), '/usr/share']);
      // The variable, when no flag is given; a symlink stands for what it names.
      expect(loadConfig({ SANDBOX_MCP_SANDBOX_RO_BIND: `${link}:/usr/share` }).sandboxRoBinds).toEqual([realpathSync(dir), '/usr/share']);
      expect(loadConfig({}).sandboxRoBinds).toBeUndefined();
      const refused = (env: NodeJS.ProcessEnv, binds?: string[]) => {
        try {
          loadConfig(env, { sandboxRoBinds: binds });
        } catch (e) {
          return (e as Error).message;
        }
        return 'accepted';
      };
      expect(refused({}, ['/usr', 'relative/path'])).toBe(
        '--sandbox-ro-bind: item 2 must be the absolute path of an existing file or directory',
      );
      expect(refused({ SANDBOX_MCP_SANDBOX_RO_BIND: join(dir, 'missing-secret-name') })).toBe(
        'SANDBOX_MCP_SANDBOX_RO_BIND: item 1 must be the absolute path of an existing file or directory',
      );
      expect(refused({}, ['/'])).toMatch(/^--sandbox-ro-bind: item 1 is the host's root/);
      expect(usageError(['ls', '--sandbox-ro-bind', '/usr'])).toBe(
        '--sandbox-ro-bind applies only to: sandbox-mcp, sandbox-mcp http, sandbox-mcp doctor',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('takes SANDBOX_MCP_STATE_DIR only as an absolute path, as SANDBOX_MCP_BWRAP and --template-dir, never quoting it', () => {
    expect(loadConfig({ SANDBOX_MCP_STATE_DIR: '/srv/sandbox-state' }).stateDir).toBe('/srv/sandbox-state');
    expect(loadConfig({ SANDBOX_MCP_STATE_DIR: '' }).stateDir).toBeUndefined();
    // Relative, a server started by a client app (cwd /) and `ls` in a terminal would read different directories.
    for (const relative of ['state-zzv', './state-zzv', '~/state-zzv']) {
      expect(() => loadConfig({ SANDBOX_MCP_STATE_DIR: relative }), relative).toThrow(/^SANDBOX_MCP_STATE_DIR must be an absolute path$/);
    }
  });

  it('takes SANDBOX_MCP_DEBUG as 1 or true, 0 or false (any case), and refuses anything else by name, never quoting it; a keeper takes that for off', () => {
    for (const on of ['1', 'true', 'TRUE']) {
      expect(() => loadConfig({ SANDBOX_MCP_DEBUG: on }), on).not.toThrow();
      expect(isDebugOn({ SANDBOX_MCP_DEBUG: on }), on).toBe(true);
    }
    expect(isDebugOn({})).toBe(false);
    for (const off of ['', '0', 'false', 'False']) {
      expect(() => loadConfig({ SANDBOX_MCP_DEBUG: off }), off).not.toThrow();
      expect(isDebugOn({ SANDBOX_MCP_DEBUG: off }), off).toBe(false);
    }
    for (const bad of ['yes-zzd', '2', ' 1']) {
      expect(() => loadConfig({ SANDBOX_MCP_DEBUG: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ SANDBOX_MCP_DEBUG: bad }), bad).toThrow(/^SANDBOX_MCP_DEBUG must be 1 or 0$/);
      // The server refused it at start-up; a keeper, which only reads it, must not fail on it.
      expect(isDebugOn({ SANDBOX_MCP_DEBUG: bad }), bad).toBe(false);
    }
  });

  it('names --provider and its variable for an unknown provider, never quoting it', () => {
    for (const [env, flags] of [
      [{}, { provider: 'zzq-cloud' }],
      [{ SANDBOX_MCP_PROVIDER: 'zzq-cloud' }, {}],
    ] as const) {
      expect(() => loadConfig(env, flags)).toThrow(/^--provider \(SANDBOX_MCP_PROVIDER\) must be one of: local, e2b$/);
    }
  });

  it('lets --help and --version through with any command and flag', () => {
    expect(parseCommandLine(['--port', '1', '--help'])).toMatchObject({ help: true });
    expect(parseCommandLine(['doctor', '--version'])).toMatchObject({ version: true });
  });

  it('documents every option in --help', () => {
    for (const name of Object.keys(OPTIONS)) expect(HELP).toContain(`--${name}`);
  });
});

describe('the configuration table (docs/configuration.md)', () => {
  it('lists exactly the flags and environment variables --help lists', () => {
    const page = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
    const section = page.split('\n## Flags and environment variables\n')[1]!.split('\n## ')[0]!;
    const table = section
      .split('\n')
      .filter((l) => l.startsWith('|'))
      .join('\n');
    const names = (text: string) => [...new Set(text.match(/--[a-z][a-z-]*|\b(?:SANDBOX_MCP|E2B)_[A-Z_]+\b/g) ?? [])].sort();
    expect(names(table)).toEqual(names(HELP));
    expect(names(table).length).toBeGreaterThanOrEqual(20);
  });
});
