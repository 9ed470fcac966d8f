// `sandbox-mcp http` with neither SANDBOX_MCP_TOKEN nor a tokens file generates a bearer token,
// prints it once to stderr, and requires it: a client holding it connects, one without it gets 401.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverEnv } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
const started: ChildProcess[] = [];
const TOKEN_LINE = /bearer token \(shown once\): (\S+)\n/;

/** How many token lines the log holds. */
const tokenLines = (log: string): number => log.match(new RegExp(TOKEN_LINE.source, 'g'))?.length ?? 0;

beforeAll(() => requireBuild());
afterAll(async () => {
  for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
  await destroyStateDir(stateDir);
});

/** Starts `http --port 0` with the clean environment (no token of any kind) and waits for both lines. */
async function startWithoutToken(): Promise<{ child: ChildProcess; url: URL; token: string; stderr: () => string }> {
  const child = spawn(process.execPath, [HOST_JS, 'http', '--port', '0'], {
    env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  started.push(child);
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log += d.toString('utf8')));
  await waitFor(() => child.exitCode !== null || (/listening on /.test(log) && TOKEN_LINE.test(log)), 'the listening and token lines');
  expect(child.exitCode, log).toBeNull();
  const url = new URL(/listening on (http:\/\/\S+)/.exec(log)![1]!);
  const token = TOKEN_LINE.exec(log)![1]!;
  return { child, url, token, stderr: () => log };
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

/** POSTs an initialize request with the given headers; returns the status. */
async function postInitialize(url: URL, headers: Record<string, string>): Promise<number> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(initialize),
  });
  await res.body?.cancel();
  return res.status;
}

describe('HTTP without a configured token', () => {
  it('generates a token, prints it once to stderr, and requires it: with it a client connects, without it 401', async () => {
    const server = await startWithoutToken();
    expect(server.token.length).toBeGreaterThanOrEqual(16);

    const client = new Client({ name: 'e2e-generated', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(server.url, {
      requestInit: { headers: { authorization: `Bearer ${server.token}` } },
    });
    await client.connect(transport);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('create_sandbox');
    await transport.terminateSession();
    await client.close();

    expect(await postInitialize(server.url, {})).toBe(401);
    expect(await postInitialize(server.url, { authorization: `Bearer ${server.token}x` })).toBe(401);
    expect(await postInitialize(server.url, { authorization: `Bearer ${server.token.slice(0, -1)}` })).toBe(401);

    await stop(server.child);
    // Once: the token line is the only place the token ever appears, requests and shutdown included.
    expect(tokenLines(server.stderr())).toBe(1);
    expect(server.stderr().split(server.token)).toHaveLength(2);
  });

  it('generates a different token at every start', async () => {
    const first = await startWithoutToken();
    const second = await startWithoutToken();
    expect(second.token).not.toBe(first.token);
    // Each server takes only its own.
    expect(await postInitialize(second.url, { authorization: `Bearer ${first.token}` })).toBe(401);
    await Promise.all([stop(first.child), stop(second.child)]);
  });
});
