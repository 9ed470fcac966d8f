// Streamable HTTP: token, Host/Origin checks, the request-body cap, separate sessions, DELETE and
// idle cleanup.
import { spawn } from 'node:child_process';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HttpServer, ok, serverEnv, startHttp, toolError } from '../support/built-server.js';
import { FIXTURES, HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { PROTOTYPE_KEYS } from '../support/prototype-keys.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
/** The faults' message (test/fixtures/fault-on-signal.mjs), which the server must never log. */
const FAULT_MARKER = 'FAULT-MESSAGE-MARKER-NEVER-LOGGED';
let server: HttpServer;
/** Names the shared server accepts besides its address: one without a port (the bound one applies), one with. */
const EXTRA_HOST = 'sandbox.example';
const EXTRA_HOST_WITH_PORT = 'other.example:4242';
/** The README's request-body cap: a full 3 MiB upload chunk (4 MiB of base64) plus 64 KiB of framing. */
const MAX_BODY_BYTES = 4 * 1024 * 1024 + 64 * 1024;

beforeAll(async () => {
  requireSandboxes();
  // The default idle timeout: no test's session may end while it waits for something slow.
  server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir }, ['--allowed-host', EXTRA_HOST, '--allowed-host', EXTRA_HOST_WITH_PORT]);
});
afterAll(async () => {
  await server?.stop();
  await destroyStateDir(stateDir);
});

const initialize = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

async function rawPost(headers: Record<string, string>): Promise<Response> {
  return fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: initialize,
  });
}

/**
 * POSTs `body` (default: initialize) to the shared server with raw node:http, which, unlike fetch,
 * lets a test set the Host header. Resolves with the status once the answer's head arrives.
 */
function rawRequest(headers: Record<string, string>, body: string = initialize): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    let status: number | undefined;
    const req = request(
      {
        host: server.url.hostname,
        port: server.url.port,
        path: '/mcp',
        method: 'POST',
        headers: {
          authorization: `Bearer ${server.token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          ...headers,
        },
      },
      (res) => {
        status = res.statusCode ?? 0;
        res.resume();
        resolve(status);
      },
    );
    // A server that answers before reading the whole body may close the socket under the upload.
    req.on('error', (e) => (status === undefined ? reject(e) : undefined));
    req.end(body);
  });
}

describe('HTTP transport', () => {
  it('requires the bearer token', async () => {
    expect((await rawPost({})).status).toBe(401);
    expect((await rawPost({ authorization: 'Bearer wrong' })).status).toBe(401);
    const good = await rawPost({ authorization: `bearer ${server.token}` }); // the scheme is case-insensitive
    expect(good.status).toBe(200);
    expect(good.headers.get('mcp-session-id')).toBeTruthy();
  });

  it('says whether the bearer token was missing, malformed or wrong, never echoing what was sent', async () => {
    const sent = 'not-the-token-7f3a9c51';
    /** What the SDK's client reports when the server refuses its initialize. */
    const connectError = async (headers: Record<string, string>): Promise<string> => {
      const refused = await server.connect(headers).then(
        () => undefined,
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      );
      if (refused === undefined) throw new Error('the server accepted the connection');
      return refused;
    };
    const missing = await connectError({});
    const wrong = await connectError({ authorization: `Bearer ${sent}` });
    expect(missing).toMatch(/no bearer token was sent/);
    expect(wrong).toMatch(/bearer token is not valid/);
    const malformed = await rawPost({ authorization: `Basic ${sent}` });
    expect(malformed.status).toBe(401);
    expect(((await malformed.json()) as { error: { message: string } }).error.message).toMatch(/not of the form Bearer <token>/);
    for (const text of [missing, wrong]) expect(text).not.toContain(sent);
  });

  it('rejects a foreign Host or Origin (DNS rebinding)', async () => {
    expect(await rawRequest({ host: `evil.example:${server.url.port}` })).toBe(403);
    expect(await rawRequest({ origin: 'http://evil.example' })).toBe(403);
    // An allowed name on another port than the one it was given with is foreign too.
    expect(await rawRequest({ host: `other.example:${server.url.port}` })).toBe(403);
    expect(await rawRequest({ origin: `http://${EXTRA_HOST}:1` })).toBe(403);
  });

  it('accepts names given with --allowed-host, and the loopback aliases, in Host and Origin', async () => {
    const port = server.url.port;
    for (const name of [`${EXTRA_HOST}:${port}`, EXTRA_HOST_WITH_PORT, `localhost:${port}`, `127.0.0.1:${port}`]) {
      expect(await rawRequest({ host: name }), `Host ${name}`).toBe(200);
      expect(await rawRequest({ host: name, origin: `http://${name}` }), `Host and Origin ${name}`).toBe(200);
    }
    // The Origin is checked on its own: a browser on an allowed name may call the bound address.
    expect(await rawRequest({ origin: `http://${EXTRA_HOST}:${port}` })).toBe(200);
    expect(await rawRequest({ origin: `http://localhost:${port}` })).toBe(200);
  });

  it('takes a request body up to 4 MiB + 64 KiB and answers 413 beyond it', async () => {
    // JSON allows trailing whitespace: the same initialize request, padded to the exact size.
    const padded = (bytes: number) => initialize + ' '.repeat(bytes - Buffer.byteLength(initialize));
    expect(await rawRequest({}, padded(MAX_BODY_BYTES))).toBe(200);
    expect(await rawRequest({}, padded(MAX_BODY_BYTES + 1))).toBe(413);
    // The server goes on serving.
    expect(await rawRequest({})).toBe(200);
  });

  it('refuses to start with a SANDBOX_MCP_TOKEN shorter than 16 characters, never echoing it', async () => {
    const short = 'fifteen-chars-x';
    expect(short).toHaveLength(15);
    const refused = await new Promise<{ code: number | null | 'listening'; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [HOST_JS, 'http', '--port', '0'], {
        env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKEN: short }),
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
        // A server that took the token would listen forever: stop it and say so.
        if (stderr.includes('listening on')) child.kill('SIGKILL');
      });
      child.on('exit', (code) => resolve({ code: stderr.includes('listening on') ? 'listening' : code, stderr }));
    });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('at least 16 characters');
    expect(refused.stderr).not.toContain('listening');
    expect(refused.stderr).not.toContain(short);

    // Sixteen characters are enough: the server starts and the token opens a session.
    const exact = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKEN: 'sixteen-chars-xy' });
    try {
      expect(exact.token).toHaveLength(16);
      const { client, transport } = await exact.connect();
      expect((await client.listTools()).tools.length).toBeGreaterThan(0);
      await transport.terminateSession();
    } finally {
      await exact.stop();
    }
  });

  it("keeps separate defaults per session, and DELETE destroys the session's sandboxes", async () => {
    const a = await server.connect();
    const b = await server.connect();
    const sa = await ok(a.client, 'create_sandbox', {});
    expect((await toolError(b.client, 'get_sandbox', {})).code).toBe('no_default_sandbox');
    const sb = await ok(b.client, 'create_sandbox', {});
    expect((await ok(a.client, 'get_sandbox', {})).sandbox_id).toBe(sa.sandbox_id);
    expect((await ok(b.client, 'get_sandbox', {})).sandbox_id).toBe(sb.sandbox_id);

    await a.transport.terminateSession(); // HTTP DELETE
    await a.client.close();
    await waitFor(
      async () => (await b.client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: sa.sandbox_id } })).isError === true,
      "the DELETEd session's sandbox to be destroyed",
    );
    expect((await toolError(b.client, 'get_sandbox', { sandbox_id: sa.sandbox_id })).category).toBe('not_found');
    expect((await ok(b.client, 'get_sandbox', {})).status).toBe('running');
    await ok(b.client, 'kill_sandbox', {});
    await b.transport.terminateSession();
    await b.client.close();
  });

  it('accepts a full 3 MiB upload_file chunk in one request', async () => {
    const { client, transport } = await server.connect();
    await ok(client, 'create_sandbox', {});
    const { randomBytes, createHash } = await import('node:crypto');
    const chunk = randomBytes(3 * 1024 * 1024);
    const r = await ok(client, 'upload_file', { path: 'big.bin', data_base64: chunk.toString('base64') });
    expect(r).toMatchObject({ bytes_written: chunk.length, size: chunk.length, sha256: createHash('sha256').update(chunk).digest('hex') });
    await transport.terminateSession();
  });

  it('ends an idle session with the same cleanup', async () => {
    // A server of its own with a 1 s idle timeout: only the session under test can go idle there.
    const idle = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir }, ['--idle-timeout', '1']);
    try {
      const c = await idle.connect();
      const sc = await ok(c.client, 'create_sandbox', {});
      // Watched from the shared server, whose sessions never go idle during a test.
      const watcher = await server.connect();
      await waitFor(
        async () => (await watcher.client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: sc.sandbox_id } })).isError === true,
        "the idle session's sandbox to be destroyed",
        60_000,
        250,
      );
      expect((await toolError(watcher.client, 'get_sandbox', { sandbox_id: sc.sandbox_id })).category).toBe('not_found');
      await watcher.transport.terminateSession();
    } finally {
      await idle.stop();
    }
  });

  it('answers odd JSON-RPC with errors that name the problem and never echo a value', async () => {
    const secret = 'ODD-VALUE-NEVER-ECHOED';
    const auth = { authorization: `Bearer ${server.token}` };
    const init = await rawPost(auth);
    const session = { ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-06-18' };
    await init.text();
    const post = (message: unknown) =>
      fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session },
        body: JSON.stringify(message),
      });
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);

    const nullParams = await post({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: null });
    expect(nullParams.status).toBe(400);
    expect(await nullParams.json()).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32600, message: 'Invalid Request: field `params` must be an object' },
    });

    // A well-formed envelope with the wrong params is answered on the request's own stream.
    const arrayArgs = await post({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'get_sandbox', arguments: [secret] } });
    const text = await arrayArgs.text();
    const data = text
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => JSON.parse(l.slice(6)) as { id: number; error?: unknown });
    expect(data.find((m) => m.id === 8)?.error).toEqual({
      code: -32602,
      message: 'Invalid params: field `params.arguments` must be an object',
    });
    expect(text).not.toContain(secret);
  });

  it('answers method names that are Object.prototype keys as any unknown method (-32601)', async () => {
    const auth = { authorization: `Bearer ${server.token}` };
    const init = await rawPost(auth);
    const session = { ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-06-18' };
    await init.text();
    const post = (message: unknown) =>
      fetch(server.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session },
        body: JSON.stringify(message),
      });
    /** The status and the JSON-RPC message answering request `id`, from a JSON or an event-stream body. */
    const answer = async (method: string, id: string) => {
      const res = await post({ jsonrpc: '2.0', id, method });
      const text = await res.text();
      const messages = res.headers.get('content-type')?.startsWith('text/event-stream')
        ? text
            .split('\n')
            .filter((l) => l.startsWith('data: '))
            .map((l) => JSON.parse(l.slice(6)) as { id?: string })
        : [JSON.parse(text) as { id?: string }];
      return { status: res.status, message: messages.find((m) => m.id === id) };
    };
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
    const unknown = await answer('no/such/method', 'unknown');
    expect(unknown.status).toBe(200);
    expect(unknown.message).toMatchObject({ error: { code: -32601 } });
    for (const method of PROTOTYPE_KEYS) {
      // A notification of that name is accepted and dropped, as any other.
      expect((await post({ jsonrpc: '2.0', method })).status, method).toBe(202);
      expect(await answer(method, method), method).toEqual({ ...unknown, message: { ...unknown.message, id: method } });
    }
    expect((await answer('ping', 'ping')).message).toMatchObject({ result: {} });
  });

  it('SIGHUP ends the server with the same cleanup as SIGTERM', async () => {
    const own = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir });
    const { client } = await own.connect();
    const created = await ok(client, 'create_sandbox', {});
    const watcher = await server.connect();
    expect((await ok(watcher.client, 'get_sandbox', { sandbox_id: created.sandbox_id })).status).toBe('running');
    const exited = new Promise<number | null>((resolve) => own.process.once('exit', (code) => resolve(code)));
    own.process.kill('SIGHUP');
    expect(await exited).toBe(0);
    expect((await toolError(watcher.client, 'get_sandbox', { sandbox_id: created.sandbox_id })).category).toBe('not_found');
    await watcher.transport.terminateSession();
  });

  it('a fault outside any request ends the server with the same cleanup, one log line without its message, and a nonzero exit', async () => {
    // A real uncaught exception in the real process: a preload throws from a SIGUSR2 listener.
    const own = await startHttp({
      SANDBOX_MCP_STATE_DIR: stateDir,
      NODE_OPTIONS: `--import ${join(FIXTURES, 'fault-on-signal.mjs')}`,
      FAULT_ON_SIGUSR2: 'exception',
      FAULT_MESSAGE: FAULT_MARKER,
    });
    let log = '';
    own.process.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    const { client } = await own.connect();
    const created = await ok(client, 'create_sandbox', {});
    const watcher = await server.connect();
    expect((await ok(watcher.client, 'get_sandbox', { sandbox_id: created.sandbox_id })).status).toBe('running');
    const exited = new Promise<number | null>((resolve) => own.process.once('exit', (code) => resolve(code)));
    own.process.kill('SIGUSR2');
    expect(await exited).toBe(70);
    expect((await toolError(watcher.client, 'get_sandbox', { sandbox_id: created.sandbox_id })).category).toBe('not_found');
    await watcher.transport.terminateSession();
    const faults = log.split('\n').filter((l) => l.includes('"kind":"uncaught_exception"'));
    expect(faults).toHaveLength(1);
    expect(JSON.parse(faults[0]!)).toMatchObject({ level: 'warn', error: 'Error' });
    expect(log).toContain('"msg":"http server stopping","reason":"uncaught_exception"');
    expect(log).not.toContain(FAULT_MARKER);
  });
});
