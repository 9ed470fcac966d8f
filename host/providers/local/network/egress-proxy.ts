// The sandbox's egress proxy, run by its keeper on the host's side: an HTTP proxy whose listening
// socket lives in the sandbox's network namespace (see netns-sockets.ts) and whose outgoing
// connections leave from the host's. CONNECT is tunnelled byte for byte (HTTPS is never
// intercepted); absolute-form HTTP requests are forwarded. Every request is checked against the
// sandbox's allow-list and connected to the address destinations.ts checked; anything else gets a
// plain-text 403 that names the host and the setting that decides it.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { connect, type Server, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AllowEntry } from '../../../network-policy.js';
import { resolveDestination, type DenialReason, type Destination, type Resolver } from './destinations.js';
import { splice } from './splice.js';

/** What the proxy checks against, and who hears about refusals. */
export interface EgressProxyOpts {
  entries: readonly AllowEntry[];
  /** Called for each refusal of the allow-list's (a host not listed, or resolving to a non-public address). */
  onDenied(host: string): void;
  resolve?: Resolver;
  /** How long a connection to a destination may take (default 30 s). */
  connectTimeoutMs?: number;
  /** Most client connections at once (default 256). */
  maxConnections?: number;
}

/** A running proxy; close() ends it and every connection through it. */
export interface EgressProxy {
  close(): void;
}

/** The setting an agent or a person changes to allow a destination (named in every 403). */
const SETTING =
  "create_sandbox's `network.allow_out`, limited to the entries the server permits (--network-allow / SANDBOX_MCP_NETWORK_ALLOW)";

// Headers that describe one hop, never forwarded (RFC 9110 §7.6.1, plus the proxy's own).
const HOP_BY_HOP = new Set([
  'connection',
  'proxy-connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** `host:port` of a CONNECT target or a URL's host (IPv6 in brackets); null when malformed. */
export function splitAuthority(authority: string, defaultPort?: number): { host: string; port: number } | null {
  const m = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(authority);
  if (!m) return null;
  const port = m[2] !== undefined ? Number(m[2]) : defaultPort;
  if (port === undefined || !Number.isInteger(port) || port < 1 || port > 65535) return null;
  return { host: m[1]!, port };
}

/** The text of a refusal: what was refused, why, and what decides it. */
export function denialText(host: string, port: number, reason: DenialReason): { status: number; body: string } {
  switch (reason) {
    case 'not_listed':
      return {
        status: 403,
        body: `sandbox-mcp: ${host}:${port} is not on this sandbox's egress allow-list. The list is ${SETTING}.\n`,
      };
    case 'private_address':
      return {
        status: 403,
        body:
          `sandbox-mcp: ${host} resolves to a loopback, link-local or private address, which the egress proxy refuses ` +
          `unless an entry names that address literally (e.g. 127.0.0.1:${port}). The list is ${SETTING}.\n`,
      };
    case 'unresolvable':
      return { status: 502, body: `sandbox-mcp: ${host} could not be resolved by the sandbox's egress proxy.\n` };
    case 'bad_host':
      return { status: 400, body: 'sandbox-mcp: the request does not name a valid host.\n' };
  }
}

function rawResponse(status: number, body: string): string {
  const reason = status === 403 ? 'Forbidden' : status === 400 ? 'Bad Request' : status === 504 ? 'Gateway Timeout' : 'Bad Gateway';
  return (
    `HTTP/1.1 ${status} ${reason}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}

/** The request's headers without hop-by-hop ones, as [name, value] pairs in their original order and case. */
function forwardedHeaders(req: IncomingMessage): [string, string][] {
  const named = new Set(HOP_BY_HOP);
  // A `Connection: x` header makes `x` hop-by-hop as well.
  for (const token of String(req.headers.connection ?? '').split(',')) named.add(token.trim().toLowerCase());
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (!named.has(req.rawHeaders[i]!.toLowerCase())) out.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
  }
  return out;
}

/** Starts the proxy on `listener` (already listening, e.g. in the sandbox's network namespace). */
export async function startEgressProxy(listener: Server, opts: EgressProxyOpts): Promise<EgressProxy> {
  // Loaded here, not at the top: most keepers run no proxy, and node:http costs each about 1 MiB.
  const { createServer, request: httpRequest } = await import('node:http');
  const connectTimeoutMs = opts.connectTimeoutMs ?? 30_000;
  const open = new Set<Duplex>();
  const track = (s: Duplex): void => {
    open.add(s);
    s.once('close', () => open.delete(s));
  };

  /** Checks a request and reports the allow-list's refusals (host name only). */
  const check = async (host: string, port: number): Promise<Destination> => {
    const dest = await resolveDestination(opts.entries, host, port, opts.resolve);
    if ('denied' in dest && (dest.denied === 'not_listed' || dest.denied === 'private_address')) opts.onDenied(displayHost(host));
    return dest;
  };

  /** Connects to a checked destination: the socket, or why not. */
  const dial = (dest: { address: string; family: 4 | 6 }, port: number): Promise<Socket | 'timeout' | 'failed'> =>
    new Promise((resolve) => {
      const upstream = connect({ host: dest.address, port, family: dest.family });
      track(upstream);
      upstream.setTimeout(connectTimeoutMs, () => {
        upstream.destroy();
        resolve('timeout');
      });
      upstream.once('error', () => resolve('failed'));
      upstream.once('connect', () => {
        upstream.setTimeout(0);
        resolve(upstream);
      });
    });

  const server = createServer({ requestTimeout: 0 });

  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    track(client);
    client.on('error', () => client.destroy());
    void (async () => {
      const target = splitAuthority(req.url ?? '');
      const refuse = (status: number, body: string): void => void client.end(rawResponse(status, body));
      if (!target) return refuse(400, denialText('', 0, 'bad_host').body);
      const dest = await check(target.host, target.port);
      if ('denied' in dest) {
        const t = denialText(displayHost(target.host), target.port, dest.denied);
        return refuse(t.status, t.body);
      }
      const upstream = await dial(dest, target.port);
      if (typeof upstream === 'string') return refuse(upstream === 'timeout' ? 504 : 502, connectFailure(target.host, target.port));
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      splice(client, upstream);
    })().catch(() => client.destroy());
  });

  server.on('upgrade', (req: IncomingMessage, client: Duplex, head: Buffer) => {
    track(client);
    client.on('error', () => client.destroy());
    void (async () => {
      const url = absoluteHttpUrl(req.url);
      const target = url && splitAuthority(url.host, 80);
      const refuse = (status: number, body: string): void => void client.end(rawResponse(status, body));
      if (!url || !target) return refuse(400, NOT_A_PROXY_REQUEST);
      const dest = await check(target.host, target.port);
      if ('denied' in dest) {
        const t = denialText(displayHost(target.host), target.port, dest.denied);
        return refuse(t.status, t.body);
      }
      const upstream = await dial(dest, target.port);
      if (typeof upstream === 'string') return refuse(upstream === 'timeout' ? 504 : 502, connectFailure(target.host, target.port));
      // The upgrade handshake goes through as the client wrote it, in origin form.
      const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`];
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
        if (!/^proxy-/i.test(req.rawHeaders[i]!)) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      }
      upstream.write(lines.join('\r\n') + '\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      splice(client, upstream);
    })().catch(() => client.destroy());
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    void forward(req, res).catch(() => res.destroy());
  });

  const forward = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = absoluteHttpUrl(req.url);
    const target = url && splitAuthority(url.host, 80);
    const answer = (status: number, body: string): void => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }).end(body);
    };
    if (!url || !target) return answer(400, NOT_A_PROXY_REQUEST);
    const dest = await check(target.host, target.port);
    if ('denied' in dest) {
      const t = denialText(displayHost(target.host), target.port, dest.denied);
      return answer(t.status, t.body);
    }
    const upstream = httpRequest({
      host: dest.address,
      family: dest.family,
      port: target.port,
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: forwardedHeaders(req).flat(),
      agent: false,
      setHost: false,
      timeout: connectTimeoutMs,
    });
    upstream.on('socket', (s) => track(s));
    upstream.once('timeout', () => upstream.destroy(new Error('timeout')));
    upstream.once('error', () => {
      if (!res.headersSent) answer(502, connectFailure(target.host, target.port));
      else res.destroy();
    });
    upstream.once('response', (up) => {
      upstream.setTimeout(0);
      const headers: string[] = [];
      for (let i = 0; i + 1 < up.rawHeaders.length; i += 2) {
        if (!HOP_BY_HOP.has(up.rawHeaders[i]!.toLowerCase())) headers.push(up.rawHeaders[i]!, up.rawHeaders[i + 1]!);
      }
      res.writeHead(up.statusCode ?? 502, headers);
      up.pipe(res);
      up.once('error', () => res.destroy());
    });
    req.pipe(upstream);
  };

  server.on('clientError', (_e, socket) => socket.destroy());
  listener.maxConnections = opts.maxConnections ?? 256;
  listener.on('connection', (socket: Socket) => {
    track(socket);
    server.emit('connection', socket);
  });
  return {
    close() {
      listener.close();
      server.close();
      for (const s of open) s.destroy();
      open.clear();
    },
  };
}

const NOT_A_PROXY_REQUEST =
  "sandbox-mcp: this is the sandbox's egress proxy: send proxy requests (absolute http:// URLs, or CONNECT for https), e.g. through HTTP_PROXY/HTTPS_PROXY.\n";

function connectFailure(host: string, port: number): string {
  return `sandbox-mcp: the egress proxy could not connect to ${displayHost(host)}:${port}.\n`;
}

/** An absolute `http:` URL as proxies receive them; null for anything else. */
function absoluteHttpUrl(text: string | undefined): URL | null {
  if (!text || !/^http:\/\//i.test(text)) return null;
  try {
    return new URL(text);
  } catch {
    return null;
  }
}

/** A host as the sandbox wrote it, reduced to the characters a host may hold (it goes into texts and the log). */
function displayHost(host: string): string {
  return host.replace(/[^A-Za-z0-9.\-:[\]*]/g, '?').slice(0, 260);
}
