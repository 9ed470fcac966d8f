// The egress proxy on its own, on this machine's loopback (its listening socket is an ordinary
// one here; in a sandbox it lives in the sandbox's namespace): forwarding, tunnelling, refusals
// and failures with their text and reports, what it strips and rewrites, that it connects to the
// address it checked (an injected resolver that answers differently the second time), that
// pipelined requests cannot open more upstream connections than the cap, and that close() ends
// every connection.
import { once } from 'node:events';
import { createServer as createHttpServer, request, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowList } from '../../host/providers/network-policy.js';
import type { EgressFailure } from '../../host/providers/local/network/egress-failures.js';
import { startEgressProxy, type EgressProxy } from '../../host/providers/local/network/egress-proxy.js';
import { holdClosedPort, type ClosedPort } from '../support/closed-port.js';
import { requireCommands } from '../support/prerequisites.js';
import { waitFor } from '../support/wait.js';

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
  const failures: EgressFailure[] = [];
  let proxy: EgressProxy;
  let proxyPort = 0;
  let originPort = 0;
  let echoPort = 0;
  /** Refused while held (test/support/closed-port.ts): no server of the other worker can take it meanwhile. */
  let closed: ClosedPort | undefined;
  let closedPort = 0;

  beforeAll(async () => {
    [originPort, echoPort, proxyPort] = await Promise.all([listen(origin), listen(echo), listen(listener)]);
    requireCommands(['python3']);
    closed = await holdClosedPort();
    closedPort = closed.port;
    proxy = await startEgressProxy(listener, {
      entries: parseAllowList([
        `127.0.0.1:${originPort}`,
        `127.0.0.1:${echoPort}`,
        `127.0.0.1:${closedPort}`,
        `localhost:${closedPort + 1}`,
      ]),
      onFailure: (f) => failures.push(f),
    });
  });

  afterAll(() => {
    proxy?.close();
    origin.close();
    echo.close();
    closed?.release();
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
    expect(failures.at(-1)).toEqual({ host: '127.0.0.1', port: originPort + 1, reason: 'not_listed' });
  });

  it('refuses a listed name that resolves to loopback, saying the address found and the entry that would allow it', async () => {
    // Listed by name only: no entry names 127.0.0.1 with this port.
    const r = await proxiedGet(proxyPort, `http://localhost:${closedPort + 1}/`);
    expect(r.status).toBe(403);
    expect(r.body).toMatch(/^sandbox-mcp: localhost resolves to (127\.0\.0\.1|::1), a loopback address, which the egress proxy refuses/);
    expect(r.body).toMatch(new RegExp(`unless an entry names that address literally \\((127\\.0\\.0\\.1|\\[::1\\]):${closedPort + 1}\\)`));
    expect(failures.at(-1)).toMatchObject({ host: 'localhost', port: closedPort + 1, reason: 'private_address' });
    expect(failures.at(-1)!.address).toMatch(/^(127\.0\.0\.1|::1)$/);
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

  it('answers 502 when an allowed destination does not accept, reporting it, and 400 to a request that is not for a proxy', async () => {
    const r = await proxiedGet(proxyPort, `http://127.0.0.1:${closedPort}/`);
    expect(r.status).toBe(502);
    expect(r.body).toBe(
      `sandbox-mcp: the sandbox's egress proxy could not reach 127.0.0.1:${closedPort}: the connection was refused (nothing listens there).\n`,
    );
    expect(failures.at(-1)).toEqual({ host: '127.0.0.1', port: closedPort, reason: 'connection_refused' });
    const tunnel = await raw(proxyPort, `CONNECT 127.0.0.1:${closedPort} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(tunnel).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(failures.at(-1)).toEqual({ host: '127.0.0.1', port: closedPort, reason: 'connection_refused' });
    const count = failures.length;
    const direct = await proxiedGet(proxyPort, '/just-a-path');
    expect(direct.status).toBe(400);
    expect(direct.body).toContain("this is the sandbox's egress proxy");
    // A malformed request is the client's mistake, not a destination's: nothing reported.
    expect(failures.length).toBe(count);
  });

  it("forwards the Host of the checked URL, never the client's own (plain requests and upgrades)", async () => {
    // The allowed origin must not be asked for another site (virtual-host fronting on a shared allowed host).
    const r = await proxiedGet(proxyPort, `http://127.0.0.1:${originPort}/vhost`, { host: `127.0.0.1:${echoPort}` });
    expect(r.status).toBe(200);
    expect(seen.at(-1)!.rawHeaders.filter((_, i, a) => i % 2 === 0 && a[i]!.toLowerCase() === 'host').length).toBe(1);
    expect(seen.at(-1)!.headers.host).toBe(`127.0.0.1:${originPort}`);
    const hosts: string[] = [];
    origin.once('upgrade', (req: IncomingMessage) => hosts.push(String(req.headers.host)));
    await raw(
      proxyPort,
      `GET http://127.0.0.1:${originPort}/ws HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\nping`,
      /ping$/,
    );
    expect(hosts).toEqual([`127.0.0.1:${originPort}`]);
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

/** A proxy on a fresh loopback listener. */
async function proxyOn(opts: Parameters<typeof startEgressProxy>[1]): Promise<{ proxy: EgressProxy; port: number }> {
  const listener = createServer();
  const port = await listen(listener);
  return { proxy: await startEgressProxy(listener, opts), port };
}

describe('egress proxy: the address it checked is the address it connects to', () => {
  // The allowed server on 127.0.0.1:P and another on 127.0.0.2:P, same port: a proxy that resolved
  // the name again would get 127.0.0.2 the second time, and reach the other one.
  const hits = { allowed: 0, other: 0 };
  const serve = (who: 'allowed' | 'other') => {
    const server = createHttpServer((_req, res) => {
      hits[who]++;
      res.end(who);
    });
    server.on('upgrade', (_req, socket: Socket) => {
      hits[who]++;
      socket.end(`HTTP/1.1 101 Switching Protocols\r\nupgrade: echo\r\nconnection: upgrade\r\n\r\n${who}`);
    });
    server.on('connection', () => hits[who]++);
    return server;
  };
  const allowed = serve('allowed');
  const other = serve('other');
  let port = 0;
  let lookups = 0;
  /** Lookups since the current request was sent: the first answers the allowed address, any later one the other. */
  let lookupsOfRequest = 0;
  let proxy: EgressProxy;
  let proxyPort = 0;

  beforeAll(async () => {
    port = await listen(allowed);
    await new Promise<void>((resolve) => other.listen(port, '127.0.0.2', resolve));
    ({ proxy, port: proxyPort } = await proxyOn({
      // The name is allowed, and so is the first answer's address (named literally); the second answer is not.
      entries: parseAllowList([`rebind.test:${port}`, `127.0.0.1:${port}`]),
      onFailure: () => undefined,
      resolve: async () => {
        lookups++;
        return [{ address: lookupsOfRequest++ === 0 ? '127.0.0.1' : '127.0.0.2', family: 4 }];
      },
    }));
  });
  afterAll(() => {
    proxy?.close();
    allowed.close();
    other.close();
  });

  it('for a plain request, a CONNECT and an upgrade, resolving the name once each', async () => {
    lookupsOfRequest = 0;
    const get = await proxiedGet(proxyPort, `http://rebind.test:${port}/`);
    expect(get).toEqual({ status: 200, body: 'allowed' });
    expect(lookups).toBe(1);
    lookupsOfRequest = 0;
    const tunnel = await raw(
      proxyPort,
      `CONNECT rebind.test:${port} HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n`,
      /allowed$/,
    );
    expect(tunnel).toMatch(/^HTTP\/1\.1 200 Connection Established\r\n[\s\S]*allowed$/);
    expect(lookups).toBe(2);
    lookupsOfRequest = 0;
    const upgrade = await raw(
      proxyPort,
      `GET http://rebind.test:${port}/ws HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n`,
      /(allowed|other)$/,
    );
    expect(upgrade).toMatch(/allowed$/);
    expect(lookups).toBe(3);
    expect(hits.other).toBe(0);
  });
});

describe('egress proxy: allowed destinations out of reach', () => {
  const failures: EgressFailure[] = [];
  // Accepts and never answers; and accepts and closes at once.
  const stalled = new Set<Socket>();
  const stall = createServer((s) => stalled.add(s));
  const hangUp = createServer((s) => s.destroy());
  let proxy: EgressProxy;
  let proxyPort = 0;
  let stallPort = 0;
  let hangUpPort = 0;

  beforeAll(async () => {
    [stallPort, hangUpPort] = await Promise.all([listen(stall), listen(hangUp)]);
    ({ proxy, port: proxyPort } = await proxyOn({
      entries: parseAllowList([`127.0.0.1:${stallPort}`, `127.0.0.1:${hangUpPort}`, 'no-such-host.invalid']),
      onFailure: (f) => failures.push(f),
      resolve: async () => {
        throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
      },
      connectTimeoutMs: 200,
    }));
  });
  afterAll(() => {
    proxy?.close();
    for (const s of stalled) s.destroy();
    stall.close();
    hangUp.close();
  });

  it('says what happened and reports it: a name that does not resolve, no answer in time, a connection closed without one', async () => {
    const unresolvable = await raw(proxyPort, 'CONNECT no-such-host.invalid:443 HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(unresolvable).toMatch(/^HTTP\/1\.1 502 Bad Gateway\r\n/);
    expect(unresolvable).toContain('could not reach no-such-host.invalid:443: its name could not be resolved on the host');
    const silent = await proxiedGet(proxyPort, `http://127.0.0.1:${stallPort}/`);
    expect(silent.status).toBe(504);
    expect(silent.body).toContain(`could not reach 127.0.0.1:${stallPort}: no connection or answer within the time allowed`);
    const closed = await proxiedGet(proxyPort, `http://127.0.0.1:${hangUpPort}/`);
    expect(closed.status).toBe(502);
    expect(closed.body).toContain(`could not reach 127.0.0.1:${hangUpPort}: it closed or broke the connection without a valid answer`);
    expect(failures).toEqual([
      { host: 'no-such-host.invalid', port: 443, reason: 'unresolvable' },
      { host: '127.0.0.1', port: stallPort, reason: 'timeout' },
      { host: '127.0.0.1', port: hangUpPort, reason: 'upstream_error' },
    ]);
  });
});

describe('egress proxy: the connection cap counts upstream connections', () => {
  const MAX = 4;
  const SOCKETS = 3;
  const PIPELINED = 20;
  // A slow server: holds every request until the test releases them (then answers at once).
  let open = 0;
  let peak = 0;
  let accepted = 0;
  let isReleased = false;
  const held: ServerResponse[] = [];
  const slow = createHttpServer((_req, res) => {
    if (isReleased) res.end('ok');
    else held.push(res);
  });
  slow.on('connection', (s: Socket) => {
    accepted++;
    peak = Math.max(peak, ++open);
    s.once('close', () => open--);
  });
  // The last request of each pipeline names a port no entry allows: its refusal, reported at once,
  // says the proxy has handled every request before it on that connection.
  const markers: number[] = [];
  let proxy: EgressProxy;
  let proxyPort = 0;
  let slowPort = 0;

  beforeAll(async () => {
    slowPort = await listen(slow);
    ({ proxy, port: proxyPort } = await proxyOn({
      entries: parseAllowList([`127.0.0.1:${slowPort}`]),
      onFailure: (f) => {
        if (f.reason === 'not_listed') markers.push(f.port);
      },
      maxConnections: MAX,
    }));
  });
  afterAll(() => {
    proxy?.close();
    slow.close();
  });

  /** Writes PIPELINED requests and a marker at once on one connection; resolves with the statuses of all the responses. */
  function pipeline(): Promise<number[]> {
    const request = (port: number) => `GET http://127.0.0.1:${port}/ HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
    return new Promise((resolve, reject) => {
      const s = connect(proxyPort, '127.0.0.1');
      let got = '';
      const statuses = () => [...got.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
      s.on('data', (d) => (got += d.toString('latin1')));
      s.on('close', () => resolve(statuses()));
      s.on('error', reject);
      s.write(request(slowPort).repeat(PIPELINED) + request(1));
    });
  }

  it('holds several sockets pipelining many requests each to the cap, answering the rest 503 on the same connection', async () => {
    const results = Promise.all(Array.from({ length: SOCKETS }, pipeline));
    await waitFor(() => markers.length === SOCKETS, 'every pipeline to be handled up to its marker');
    // Connections the proxy opened are in the server's accept queue by now: a poll phase takes them.
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    const peakBeforeRelease = peak;
    isReleased = true;
    for (const r of held.splice(0)) r.end('ok');
    const statuses = (await results).flat();
    expect(peakBeforeRelease).toBe(MAX);
    expect(peak).toBeLessThanOrEqual(MAX);
    // Each connection got every answer, in order, the marker's 403 last (which closes it).
    expect(statuses.length).toBe(SOCKETS * (PIPELINED + 1));
    expect(statuses.filter((s) => s === 200).length).toBe(accepted);
    expect(statuses.filter((s) => s === 403).length).toBe(SOCKETS);
    expect(statuses.filter((s) => s !== 200 && s !== 403 && s !== 503)).toEqual([]);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0);
  });
});
