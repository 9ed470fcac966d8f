// Streamable HTTP: token, Host/Origin checks, separate sessions, DELETE and idle cleanup.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destroyAll, ok, requirePrerequisites, startHttp, tempStateDir, toolError, waitFor, type HttpServer } from './harness.js';

const stateDir = tempStateDir();
let server: HttpServer;

beforeAll(async () => {
  requirePrerequisites();
  server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir }, ['--idle-timeout', '2']);
});
afterAll(async () => {
  await server?.stop();
  await destroyAll(stateDir);
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

describe('HTTP transport', () => {
  it('requires the bearer token', async () => {
    expect((await rawPost({})).status).toBe(401);
    expect((await rawPost({ authorization: 'Bearer wrong' })).status).toBe(401);
    const good = await rawPost({ authorization: `bearer ${server.token}` }); // the scheme is case-insensitive
    expect(good.status).toBe(200);
    expect(good.headers.get('mcp-session-id')).toBeTruthy();
  });

  it('rejects a foreign Host or Origin (DNS rebinding)', async () => {
    // fetch will not let us set Host, so speak raw HTTP for that case.
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        {
          host: server.url.hostname,
          port: server.url.port,
          path: '/mcp',
          method: 'POST',
          headers: { host: `evil.example:${server.url.port}`, authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(initialize);
    });
    expect(status).toBe(403);
    expect((await rawPost({ authorization: `Bearer ${server.token}`, origin: 'http://evil.example' })).status).toBe(403);
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
    const c = await server.connect();
    const sc = await ok(c.client, 'create_sandbox', {});
    const watcher = await server.connect();
    // The watcher's own calls keep it alive while c goes idle (timeout 2 s).
    await waitFor(
      async () => (await watcher.client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: sc.sandbox_id } })).isError === true,
      "the idle session's sandbox to be destroyed",
      60_000,
      500,
    );
    expect((await toolError(watcher.client, 'get_sandbox', { sandbox_id: sc.sandbox_id })).category).toBe('not_found');
    await watcher.transport.terminateSession();
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
});
