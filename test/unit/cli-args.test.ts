// The command line: every mistake is named (an unknown option, a flag given to a command it does
// not apply to, a missing value) without echoing a value; defaults match the help text.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HELP, OPTIONS, parseCommandLine } from '../../host/cli/args.js';
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
      '--json applies only to: sandbox-mcp doctor, sandbox-mcp ls, sandbox-mcp logs, sandbox-mcp kill, sandbox-mcp cancel',
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

  it('lets --help and --version through with any command and flag', () => {
    expect(parseCommandLine(['--port', '1', '--help'])).toMatchObject({ help: true });
    expect(parseCommandLine(['doctor', '--version'])).toMatchObject({ version: true });
  });

  it('documents every option in --help', () => {
    for (const name of Object.keys(OPTIONS)) expect(HELP).toContain(`--${name}`);
  });
});

describe("the README's configuration table", () => {
  it('lists exactly the flags and environment variables --help lists', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = readme.split('\n## Configuration\n')[1]!.split('\n## ')[0]!;
    const table = section
      .split('\n')
      .filter((l) => l.startsWith('|'))
      .join('\n');
    const names = (text: string) => [...new Set(text.match(/--[a-z][a-z-]*|\b(?:SANDBOX_MCP|E2B)_[A-Z_]+\b/g) ?? [])].sort();
    expect(names(table)).toEqual(names(HELP));
    expect(names(table).length).toBeGreaterThanOrEqual(20);
  });
});
