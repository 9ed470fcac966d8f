// The built CLI says what is wrong and what it is doing: usage errors name the flag and exit 2,
// --version is the package's, --help lists every agent op, and a person who starts the server in
// a terminal is told it waits for an MCP client (on stderr; stdout stays the protocol's).
import { execFile, spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { OP_NAMES } from '../../shared/protocol.js';
import { serverEnv } from '../support/built-server.js';
import { HOST_JS, REPO } from '../support/paths.js';
import { tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOST_JS, ...args], { env: serverEnv() }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('the sandbox-mcp command line', () => {
  it('--version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(`${REPO}/package.json`, 'utf8')) as { version: string };
    expect(await cli(['--version'])).toMatchObject({ code: 0, stdout: `${pkg.version}\n` });
  });

  it("--help names every op of the agent protocol, from the protocol's own list", async () => {
    const r = await cli(['--help']);
    expect(r.code).toBe(0);
    const agentEntry = r.stdout.split('sandbox-mcp agent <sandbox_id>')[1]!.split('\n  sandbox-mcp ')[0]!;
    const listed = /\(op: one of\s+([^;]+);/.exec(agentEntry)?.[1]?.split(/,\s*/);
    expect(listed).toEqual([...OP_NAMES]);
  });

  it('names an unknown option and an http-only flag given without http, exit 2, serving nothing', async () => {
    // --port is http's and the dashboard's; --idle-timeout http's alone.
    expect(await cli(['--foo'])).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'sandbox-mcp: unknown option --foo (see sandbox-mcp --help)\n',
    });
    expect(await cli(['--port', '8000'])).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'sandbox-mcp: --port applies only to: sandbox-mcp http, sandbox-mcp dashboard\n',
    });
    expect(await cli(['--idle-timeout', '60'])).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'sandbox-mcp: --idle-timeout applies only to: sandbox-mcp http\n',
    });
  });

  it('tells a person at a terminal that it waits for an MCP client', async () => {
    // `script` gives the server a terminal for stdin; the line goes to stderr, which it shows too.
    const stateDir = tempStateDir();
    const child = spawn('script', ['-qec', `${process.execPath} ${HOST_JS}`, '/dev/null'], {
      env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    try {
      await waitFor(() => out.includes('waiting for an MCP client'), 'the terminal hint');
      expect(out).toContain('sandbox-mcp: serving MCP over stdio: waiting for an MCP client to speak JSON-RPC on stdin.');
    } finally {
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
      rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
