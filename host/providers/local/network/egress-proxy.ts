// The sandbox's egress proxy, run by its keeper on the host's side: an HTTP proxy whose listening
// socket lives in the sandbox's network namespace (see netns-sockets.ts) and whose outgoing
// connections leave from the host's. CONNECT is tunnelled byte for byte (HTTPS is never
// intercepted); absolute-form HTTP requests are forwarded. Every request is checked against the
// sandbox's allow-list and connected to the address destinations.ts checked; anything else gets a
// plain-text 403 that names the host and the setting that decides it.
import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import { connect, Socket, type Server } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AllowEntry } from '../../network-policy.js';
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

/** What every phase of one proxy shares: its options, node:http, and the connections it holds open. */
interface ProxyContext {
  readonly opts: EgressProxyOpts;
  readonly http: typeof import('node:http');
  readonly connectTimeoutMs: number;
  /** Every client and upstream connection still open, destroyed by close(). */
  readonly open: Set<Duplex>;
}

/** A refused request: the status and the plain text sent back. */
interface Refusal {
  status: number;
  body: string;
}

/** A request's destination as the client named it. */
interface Target {
  host: string;
  port: number;
}

/** Starts the proxy on `listener` (already listening, e.g. in the sandbox's network namespace). */
export async function startEgressProxy(listener: Server, opts: EgressProxyOpts): Promise<EgressProxy> {
  // Loaded here, not at the top: most keepers run no proxy, and node:http costs each about 1 MiB.
  const http = await import('node:http');
  const ctx: ProxyContext = { opts, http, connectTimeoutMs: opts.connectTimeoutMs ?? 30_000, open: new Set() };
  const server = http.createServer({ requestTimeout: 0 });
  server.on('connect', (req: IncomingMessage, client: Duplex, head: Buffer) => handleConnect(ctx, req, client, head));
  server.on('upgrade', (req: IncomingMessage, client: Duplex, head: Buffer) => handleUpgrade(ctx, req, client, head));
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    forwardRequest(ctx, req, res).catch(() => res.destroy());
  });
  server.on('clientError', (_e, socket) => socket.destroy());
  acceptConnections(ctx, listener, server);
  return {
    close() {
      listener.close();
      server.close();
      for (const s of ctx.open) s.destroy();
      ctx.open.clear();
    },
  };
}

// Phase 1, accept: connections arrive on the listener (in the sandbox's namespace) and are handed
// to the HTTP server, at most maxConnections at once.
function acceptConnections(ctx: ProxyContext, listener: Server, server: HttpServer): void {
  listener.maxConnections = ctx.opts.maxConnections ?? 256;
  listener.on('connection', (socket: Socket) => {
    track(ctx, socket);
    server.emit('connection', socket);
  });
}

/** Holds `s` open until it closes, so that close() can end it. */
function track(ctx: ProxyContext, s: Duplex): void {
  ctx.open.add(s);
  s.once('close', () => ctx.open.delete(s));
}

// Phase 2, parse the request: a CONNECT names `host:port`; every other request must be an
// absolute http:// URL (origin-form requests are not proxy requests).

/** The destination of a request in absolute form (port 80 by default) with its URL; null when it is not one. */
function proxyTarget(req: IncomingMessage): { url: URL; target: Target } | null {
  const url = absoluteHttpUrl(req.url);
  const target = url && splitAuthority(url.host, 80);
  return url && target ? { url, target } : null;
}

// Phase 3, check the policy: the allow-list decides, on the address destinations.ts resolved.

/** Checks a destination and reports the allow-list's refusals (host name only). */
async function checkPolicy(ctx: ProxyContext, { host, port }: Target): Promise<Destination> {
  const dest = await resolveDestination(ctx.opts.entries, host, port, ctx.opts.resolve);
  if ('denied' in dest && (dest.denied === 'not_listed' || dest.denied === 'private_address')) ctx.opts.onDenied(displayHost(host));
  return dest;
}

// Phase 4, connect: to the checked address, never to the name again (it could resolve elsewhere).

/** Connects to a checked destination: the socket, or why not. */
function dial(ctx: ProxyContext, dest: { address: string; family: 4 | 6 }, port: number): Promise<Socket | 'timeout' | 'failed'> {
  return new Promise((resolve) => {
    const upstream = connect({ host: dest.address, port, family: dest.family });
    track(ctx, upstream);
    upstream.setTimeout(ctx.connectTimeoutMs, () => {
      upstream.destroy();
      resolve('timeout');
    });
    upstream.once('error', () => resolve('failed'));
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      resolve(upstream);
    });
  });
}

/** Checks the policy, then connects: the upstream socket, or the refusal to send the client. */
async function reach(ctx: ProxyContext, target: Target): Promise<Socket | Refusal> {
  const dest = await checkPolicy(ctx, target);
  if ('denied' in dest) return denialText(displayHost(target.host), target.port, dest.denied);
  const upstream = await dial(ctx, dest, target.port);
  if (typeof upstream === 'string') return { status: upstream === 'timeout' ? 504 : 502, body: connectFailure(target.host, target.port) };
  return upstream;
}

// Phase 5, pipe: a tunnel copies bytes both ways; a forwarded request is relayed as node:http parsed it.

/** CONNECT: a tunnel to the destination, byte for byte (HTTPS is never intercepted). */
function handleConnect(ctx: ProxyContext, req: IncomingMessage, client: Duplex, head: Buffer): void {
  guardClient(ctx, client);
  (async () => {
    const target = splitAuthority(req.url ?? '');
    if (!target) return refuseRaw(client, { status: 400, body: denialText('', 0, 'bad_host').body });
    const upstream = await reach(ctx, target);
    if (!(upstream instanceof Socket)) return refuseRaw(client, upstream);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    tunnel(client, upstream, head);
  })().catch(() => client.destroy());
}

/** An absolute-form request asking to upgrade (e.g. a WebSocket): its handshake, then a tunnel. */
function handleUpgrade(ctx: ProxyContext, req: IncomingMessage, client: Duplex, head: Buffer): void {
  guardClient(ctx, client);
  (async () => {
    const parsed = proxyTarget(req);
    if (!parsed) return refuseRaw(client, { status: 400, body: NOT_A_PROXY_REQUEST });
    const upstream = await reach(ctx, parsed.target);
    if (!(upstream instanceof Socket)) return refuseRaw(client, upstream);
    upstream.write(upgradeHandshake(req, parsed.url));
    tunnel(client, upstream, head);
  })().catch(() => client.destroy());
}

/** A plain absolute-form HTTP request: forwarded without hop-by-hop headers, its response relayed. */
async function forwardRequest(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const answer = ({ status, body }: Refusal): void => {
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' }).end(body);
  };
  const parsed = proxyTarget(req);
  if (!parsed) return answer({ status: 400, body: NOT_A_PROXY_REQUEST });
  const { url, target } = parsed;
  const dest = await checkPolicy(ctx, target);
  if ('denied' in dest) return answer(denialText(displayHost(target.host), target.port, dest.denied));
  const upstream = ctx.http.request({
    host: dest.address,
    family: dest.family,
    port: target.port,
    method: req.method,
    path: `${url.pathname}${url.search}`,
    headers: forwardedHeaders(req).flat(),
    agent: false,
    setHost: false,
    timeout: ctx.connectTimeoutMs,
  });
  upstream.on('socket', (s) => track(ctx, s));
  upstream.once('timeout', () => upstream.destroy(new Error('timeout')));
  upstream.once('error', () => {
    if (!res.headersSent) answer({ status: 502, body: connectFailure(target.host, target.port) });
    else res.destroy();
  });
  upstream.once('response', (up) => {
    upstream.setTimeout(0);
    res.writeHead(up.statusCode ?? 502, withoutHopByHop(up.rawHeaders));
    up.pipe(res);
    up.once('error', () => res.destroy());
  });
  req.pipe(upstream);
}

/** A raw client connection (CONNECT, upgrade): held for close(), destroyed on its own error. */
function guardClient(ctx: ProxyContext, client: Duplex): void {
  track(ctx, client);
  client.on('error', () => client.destroy());
}

/** Answers a raw client connection with a refusal and closes it. */
function refuseRaw(client: Duplex, { status, body }: Refusal): void {
  client.end(rawResponse(status, body));
}

/** Sends what the client already wrote past the request, then joins the two connections. */
function tunnel(client: Duplex, upstream: Socket, head: Buffer): void {
  if (head.length > 0) upstream.write(head);
  splice(client, upstream);
}

/** The upgrade request as the client wrote it, in origin form, without the proxy's own headers. */
function upgradeHandshake(req: IncomingMessage, url: URL): string {
  const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (!/^proxy-/i.test(req.rawHeaders[i]!)) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
  }
  return lines.join('\r\n') + '\r\n\r\n';
}

/** A response's raw headers (flat name, value list) without hop-by-hop ones. */
function withoutHopByHop(rawHeaders: string[]): string[] {
  const headers: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    if (!HOP_BY_HOP.has(rawHeaders[i]!.toLowerCase())) headers.push(rawHeaders[i]!, rawHeaders[i + 1]!);
  }
  return headers;
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
