// The egress proxy on its own, on this machine's loopback (its listening socket is an ordinary
// one here; in a sandbox it lives in the sandbox's namespace): forwarding, tunnelling, refusals
// and their text, what it strips, and that close() ends every connection.
import { once } from 'node:events';
import { createServer as createHttpServer, request, type IncomingMessage, type Server as HttpServer } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowList } from '../../host/providers/network-policy.js';
import { startEgressProxy, type EgressProxy } from '../../host/providers/local/network/egress-proxy.js';

function listen(server: Server | HttpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

/** Sends raw bytes to the proxy and collects everything until it closes (or `until` matches). */
function raw(port: number, text: string, until?: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => {
      got += d.toString('latin1');
      if (until?.test(got)) {
        s.destroy();
        resolve(got);
      }
    });
    s.on('end', () => resolve(got));
    s.on('close', () => resolve(got));
    s.on('error', reject);
    s.write(text, 'latin1');
  });
}

/** A GET through the proxy in absolute form, as HTTP_PROXY clients send it. */
function proxiedGet(proxyPort: number, url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: proxyPort, path: url, headers: { host: new URL(url, 'http://x').host, ...headers } },
      (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe('egress proxy', () => {
  const seen: IncomingMessage[] = [];
  const origin = createHttpServer((req, res) => {
    seen.push(req);
    res.setHeader('x-origin', 'yes');
    res.end(`origin saw ${req.method} ${req.url}`);
  });
  origin.on('upgrade', (_req, socket: Socket, head: Buffer) => {
    socket.write('HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: upgrade\r\n\r\n');
    socket.write(head);
    socket.pipe(socket);
  });
  const echo = createServer((s) => s.pipe(s));
  const listener = createServer();
  const denied: string[] = [];
  let proxy: EgressProxy;
  let proxyPort = 0;
  let originPort = 0;
  let echoPort = 0;
  let closedPort = 0;

  beforeAll(async () => {
    [originPort, echoPort, proxyPort] = await Promise.all([listen(origin), listen(echo), listen(listener)]);
    const spare = createServer();
    closedPort = await listen(spare);
    spare.close();
    proxy = await startEgressProxy(listener, {
      entries: parseAllowList([
        `127.0.0.1:${originPort}`,
        `127.0.0.1:${echoPort}`,
        `127.0.0.1:${closedPort}`,
        `localhost:${closedPort + 1}`,
      ]),
      onDenied: (host) => denied.push(host),
    });
  });

  afterAll(() => {
    proxy?.close();
    origin.close();
    echo.close();
  });

  it('forwards an allowed absolute-form request in origin form, without the proxy headers', async () => {
    const r = await proxiedGet(proxyPort, `http://127.0.0.1:${originPort}/a/b?c=d`, {
      'proxy-authorization': 'Basic secret',
      'proxy-connection': 'keep-alive',
      'x-kept': '1',
    });
    expect(r).toEqual({ status: 200, body: 'origin saw GET /a/b?c=d' });
    const req = seen.at(-1)!;
    expect(req.headers.host).toBe(`127.0.0.1:${originPort}`);
    expect(req.headers['x-kept']).toBe('1');
    expect(req.headers['proxy-authorization']).toBeUndefined();
    expect(req.headers['proxy-connection']).toBeUndefined();
  });

  it('refuses an unlisted destination with a 403 naming the host and the setting, and reports the host only', async () => {
    const before = seen.length;
    const r = await proxiedGet(proxyPort, `http://127.0.0.1:${originPort + 1}/private/path?token=x`);
    expect(r.status).toBe(403);
    expect(r.body).toContain(`127.0.0.1:${originPort + 1} is not on this sandbox's egress allow-list`);
    expect(r.body).toContain("create_sandbox's `network.allow_out`");
    expect(r.body).toContain('SANDBOX_MCP_NETWORK_ALLOW');
    expect(r.body).not.toContain('private/path');
    expect(seen.length).toBe(before);
    expect(denied.at(-1)).toBe('127.0.0.1');
  });

  it('refuses a listed name that resolves to loopback', async () => {
    // Listed by name only: no entry names 127.0.0.1 with this port.
    const r = await proxiedGet(proxyPort, `http://localhost:${closedPort + 1}/`);
    expect(r.status).toBe(403);
    expect(r.body).toMatch(/^sandbox-mcp: localhost resolves to a loopback, link-local or private address/);
    expect(denied.at(-1)).toBe('localhost');
  });

  it('tunnels CONNECT byte for byte, including bytes sent with the request', async () => {
    const got = await raw(
      proxyPort,
      `CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\nHost: 127.0.0.1:${echoPort}\r\n\r\nearly-bytes\u00ff`,
      /early-bytes\u00ff$/,
    );
    expect(got).toBe('HTTP/1.1 200 Connection Established\r\n\r\nearly-bytes\u00ff');
  });

  it('refuses CONNECT to an unlisted port with the same 403, and malformed targets with a 400', async () => {
    const got = await raw(proxyPort, `CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(got).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(got).toContain("127.0.0.1:1 is not on this sandbox's egress allow-list");
    expect(await raw(proxyPort, `CONNECT nonsense HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
  });

  it('answers 502 when an allowed destination does not accept, and 400 to a request that is not for a proxy', async () => {
    const r = await proxiedGet(proxyPort, `http://127.0.0.1:${closedPort}/`);
    expect(r.status).toBe(502);
    expect(r.body).toContain('could not connect');
    const direct = await proxiedGet(proxyPort, '/just-a-path');
    expect(direct.status).toBe(400);
    expect(direct.body).toContain("this is the sandbox's egress proxy");
  });

  it('passes an upgrade through to an allowed destination', async () => {
    const got = await raw(
      proxyPort,
      `GET http://127.0.0.1:${originPort}/ws HTTP/1.1\r\nHost: 127.0.0.1:${originPort}\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\nping`,
      /ping$/,
    );
    expect(got).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n[\s\S]*\r\n\r\nping$/);
  });

  it('ends every connection on close', async () => {
    const s = connect(proxyPort, '127.0.0.1');
    s.write(`CONNECT 127.0.0.1:${echoPort} HTTP/1.1\r\nHost: x\r\n\r\n`);
    await once(s, 'data');
    const closed = once(s, 'close');
    proxy.close();
    await closed;
    await expect(raw(proxyPort, 'GET / HTTP/1.1\r\n\r\n')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
