// The CLI around the server: `npm start`, --help, and the protocol-level debugging
// commands, which use the same agent client as the server.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { connectStdio, ok, serverEnv } from '../support/built-server.js';
import { HOST_JS, REPO } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

const stateDir = tempStateDir();
let provider: Provider;
let sandboxId: string;

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOST_JS, ...args], { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }) }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

beforeAll(async () => {
  requireSandboxes();
  provider = createLocalProvider({ stateDir });
  sandboxId = (await provider.create({ timeoutS: 600 })).sandbox_id;
});
afterAll(async () => {
  await provider?.close();
  await destroyStateDir(stateDir);
});

describe('sandbox-mcp CLI', () => {
  // Plain `npm start` is for people: npm prints its "> sandbox-mcp start" banner on stdout (only
  // --silent hides it, and nothing should silence npm's errors). What it runs must add nothing.
  it('`npm --silent start` serves MCP on a clean stdout: the build and the server print no non-protocol line', async () => {
    const transport = new StdioClientTransport({
      command: 'npm',
      args: ['--silent', 'start'],
      cwd: REPO,
      env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }),
      stderr: 'pipe',
    });
    const errors: Error[] = [];
    transport.onerror = (e) => errors.push(e);
    const client = new Client({ name: 'npm-start', version: '1' });
    await client.connect(transport);
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(20); // the seeds' fifteen, send_task_input, expose_port, stop_processes, snapshot_sandbox and workspace_changes
    await client.close();
    expect(errors).toEqual([]);
  });

  it('npm is not silenced: its own errors show (a mistyped script names itself)', async () => {
    const r = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile('npm', ['run', 'no-such-script'], { cwd: REPO }, (error, _stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr }),
      ),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('Missing script: "no-such-script"');
  });

  it('--help documents the transports, configuration and debugging commands', async () => {
    const { code, stdout } = await cli(['--help']);
    expect(code).toBe(0);
    for (const word of [
      'http',
      '--port',
      '--provider',
      'SANDBOX_MCP_STATE_DIR',
      'SANDBOX_MCP_LOCAL_NETWORK',
      'SANDBOX_MCP_NETWORK_ALLOW',
      '--network-default',
      'network [sandbox_id]',
      'SANDBOX_MCP_TOKEN',
      'E2B_API_KEY',
      'agent <sandbox_id>',
      'selftest <sandbox_id>',
    ]) {
      expect(stdout).toContain(word);
    }
  });

  it('`agent` sends one raw request and prints the raw response line', async () => {
    const hello = await cli(['agent', sandboxId, 'hello']);
    expect(hello.code).toBe(0);
    const line = JSON.parse(hello.stdout.trim());
    expect(line).toMatchObject({ protocol: 1, ok: true, result: { protocol: 1, max_tasks: 128, stream_cap_bytes: 1048576 } });

    const bad = await cli(['agent', `local:${sandboxId}`, 'get', '{"task_id":"NOT-HEX-VALUE"}']);
    expect(bad.code).toBe(1);
    const refusal = JSON.parse(bad.stdout.trim());
    expect(refusal).toMatchObject({ protocol: 1, ok: false, error: { code: 'invalid_request' } });
    expect(bad.stdout).not.toContain('NOT-HEX-VALUE');
  });

  it('`selftest` runs the agent selftest inside the sandbox', async () => {
    const r = await cli(['selftest', sandboxId]);
    const line = JSON.parse(r.stdout.trim());
    expect(line.ok).toBe(true);
    expect(line.result.ok).toBe(true);
    expect(line.result.checks.length).toBeGreaterThanOrEqual(5);
    expect(r.code).toBe(0);
  });

  it('gives local sandboxes their own network unless SANDBOX_MCP_LOCAL_NETWORK=host', async () => {
    const interfaces = async (network?: string) => {
      const s = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir, ...(network ? { SANDBOX_MCP_LOCAL_NETWORK: network } : {}) });
      try {
        await ok(s.client, 'create_sandbox', {});
        const r = await ok(s.client, 'run_command', { command: "awk -F: 'NR>2{print $1}' /proc/net/dev" });
        return r.stdout
          .split('\n')
          .map((l: string) => l.trim())
          .filter(Boolean)
          .sort();
      } finally {
        await s.close();
      }
    };
    expect(await interfaces()).toEqual(['lo']);
    const hostInterfaces = readFileSync('/proc/net/dev', 'utf8')
      .split('\n')
      .slice(2)
      .map((l) => l.split(':')[0]!.trim())
      .filter(Boolean)
      .sort();
    expect(await interfaces('host')).toEqual(hostInterfaces);
    expect((await cli(['--help'])).code).toBe(0);
    const bad = await new Promise<number>((resolve) =>
      execFile(process.execPath, [HOST_JS], { env: serverEnv({ SANDBOX_MCP_LOCAL_NETWORK: 'bogus' }) }, (e) =>
        resolve(Number((e as { code?: number } | null)?.code ?? 0)),
      ),
    );
    expect(bad).toBe(2);
  });

  it('refuses unknown commands and bad flags with exit 2', async () => {
    expect((await cli(['frobnicate'])).code).toBe(2);
    expect((await cli(['--provider', 'nope'])).code).toBe(2);
    expect((await cli(['http', '--port', 'x'])).code).toBe(2);
    const wildcard = await cli(['http', '--host', '0.0.0.0', '--port', '0']);
    expect(wildcard.code).toBe(2);
    expect(wildcard.stderr).toContain('--allowed-host');
    expect((await cli(['agent', sandboxId, 'hello', '[1,2]'])).code).toBe(2);
  });

  it('takes a malformed sandbox id as a bad command line (exit 2) in network, agent and selftest too, never quoting it', async () => {
    for (const args of [
      ['network', 'bad id zzq!'],
      ['agent', 'bad id zzq!', 'hello'],
      ['selftest', 'bad id zzq!'],
      ['kill', 'bad id zzq!'],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toBe('sandbox-mcp: sandbox_id is not a valid sandbox id\n');
    }
  });
});
