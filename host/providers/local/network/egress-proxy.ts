// The sandbox's egress proxy, run by its keeper on the host's side: an HTTP proxy whose listening
// socket lives in the sandbox's network namespace (see netns-sockets.ts) and whose outgoing
// connections leave from the host's. CONNECT is tunnelled byte for byte (HTTPS is never
// intercepted); absolute-form HTTP requests are forwarded, with the Host the checked URL names.
// Every request is checked against the sandbox's allow-list and connected to the address
// destinations.ts checked (the name is never resolved again); anything else gets a plain-text 403
// that names the host, the reason and the setting that decides it, and an allowed destination out
// of reach a 502 or 504 saying what happened. Each of those is reported (onFailure). Upstream
// connections are counted: pipelined requests on one client connection cannot open more than
// the cap between them.
import type { Server as HttpServer, IncomingMessage, ServerResponse } from 'node:http';
import { connect, Socket, type Server } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AllowEntry } from '../../network-policy.js';
import { checkListed, nonPublicKind, resolveListed, type DenialReason, type Resolver } from './destinations.js';
import type { EgressFailure, EgressFailureReason } from './egress-failures.js';
import { splice } from './splice.js';

/** What the proxy checks against, and who hears about the requests that did not get through. */
export interface EgressProxyOpts {
  entries: readonly AllowEntry[];
  /** Called for each refusal of the allow-list's and each allowed destination out of reach (never for a malformed request or a full proxy). */
  onFailure(failure: EgressFailure): void;
  /** Resolves names (default dns.lookup); called once per request, never again for its connection. */
  resolve?: Resolver;
  /** How long a connection to a destination, or a forwarded request's answer, may take (default 30 s). */
  connectTimeoutMs?: number;
  /** Most client connections, and most upstream connections, at once (default 256 each). */
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

/** An address as it appears after `host:` in a URL (IPv6 in brackets). */
function urlHost(address: string): string {
  return address.includes(':') ? `[${address}]` : address;
}

/** The answer to a request the check stops: what was refused, why, and what decides it (`address`: the non-public one a name resolved to). */
export function denialText(host: string, port: number, reason: DenialReason, address?: string): ProxyAnswer {
  switch (reason) {
    case 'not_listed':
      return {
        status: 403,
        body: `sandbox-mcp: ${host}:${port} is not on this sandbox's egress allow-list. The list is ${SETTING}.\n`,
      };
    case 'private_address': {
      const found = address ?? '127.0.0.1';
      return {
        status: 403,
        body:
          `sandbox-mcp: ${host} resolves to ${found}, a ${nonPublicKind(found)} address, which the egress proxy refuses ` +
          `unless an entry names that address literally (${urlHost(found)}:${port}). The list is ${SETTING}.\n`,
      };
    }
    case 'unresolvable':
      return { status: 502, body: unreachableText(host, port, 'unresolvable') };
    case 'bad_host':
      return { status: 400, body: 'sandbox-mcp: the request does not name a valid host.\n' };
  }
}

/** The text of a 502/504 for an allowed destination out of reach: which, and what happened. */
function unreachableText(host: string, port: number, reason: EgressFailureReason): string {
  const what: Partial<Record<EgressFailureReason, string>> = {
    unresolvable: 'its name could not be resolved on the host',
    connection_refused: 'the connection was refused (nothing listens there)',
    timeout: 'no connection or answer within the time allowed',
    unreachable: 'the host has no route to it',
    upstream_error: 'it closed or broke the connection without a valid answer',
  };
  return `sandbox-mcp: the sandbox's egress proxy could not reach ${host}:${port}: ${what[reason] ?? 'it failed'}.\n`;
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

function rawResponse(status: number, body: string): string {
  return (
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Bad Gateway'}\r\ncontent-type: text/plain; charset=utf-8\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  );
}

/**
 * The request's headers for the destination, as [name, value] pairs in their original order and
 * case: without hop-by-hop ones, and with Host taken from the checked URL (RFC 9112 §3.2.2: a
 * proxy makes Host from the request target). A Host the client wrote could name another site on
 * an allowed address (virtual-host fronting); the destination sees only the one that was checked.
 */
function forwardedHeaders(req: IncomingMessage, url: URL): [string, string][] {
  const named = new Set([...HOP_BY_HOP, 'host']);
  // A `Connection: x` header makes `x` hop-by-hop as well.
  for (const token of String(req.headers.connection ?? '').split(',')) named.add(token.trim().toLowerCase());
  const out: [string, string][] = [['Host', url.host]];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (!named.has(req.rawHeaders[i]!.toLowerCase())) out.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
  }
  // One request per upstream connection: it closes after the answer, freeing its slot.
  out.push(['Connection', 'close']);
  return out;
}

/** What every phase of one proxy shares: its options, node:http, and the connections it holds open. */
interface ProxyContext {
  readonly opts: EgressProxyOpts;
  readonly http: typeof import('node:http');
  readonly connectTimeoutMs: number;
  readonly maxConnections: number;
  /** Every client and upstream connection still open, destroyed by close(). */
  readonly open: Set<Duplex>;
  /** Requests holding an upstream slot: resolving, connecting, or connected (until that connection closes). */
  upstreams: number;
}

/** The proxy's own answer to a request that does not get through (or is not one): the status and the plain text sent back. */
interface ProxyAnswer {
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
  const ctx: ProxyContext = {
    opts,
    http,
    connectTimeoutMs: opts.connectTimeoutMs ?? 30_000,
    maxConnections: opts.maxConnections ?? 256,
    open: new Set(),
    upstreams: 0,
  };
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
// to the HTTP server, at most maxConnections at once. That bounds client sockets only: one of them
// can carry any number of pipelined requests, so upstream connections are counted apart (reach).
function acceptConnections(ctx: ProxyContext, listener: Server, server: HttpServer): void {
  listener.maxConnections = ctx.maxConnections;
  listener.on('connection', (socket: Socket) => {
    track(ctx, socket);
    server.emit('connection', socket);
  });
}

/** The upstream connections of each client connection's forwarded requests, ended when it closes. */
const upstreamsOf = new WeakMap<Duplex, Set<Socket>>();

/** Ends `upstream` when the client connection `client` closes. */
function holdFor(client: Duplex, upstream: Socket): void {
  let held = upstreamsOf.get(client);
  if (!held) {
    const set = new Set<Socket>();
    upstreamsOf.set(client, set);
    client.once('close', () => {
      for (const s of set) s.destroy();
      set.clear();
    });
    held = set;
  }
  held.add(upstream);
  upstream.once('close', () => held.delete(upstream));
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

// Phase 3, check the policy: the allow-list decides, first on the host as written, then on the
// address destinations.ts resolved. Phase 4, connect: to the checked address, never to the name
// again (it could resolve elsewhere). Resolving and connecting happen inside an upstream slot: at
// most maxConnections requests are being resolved, connected or served upstream at once, however
// they arrived.

/** Connects to a checked address: the socket, or why not. */
function dial(ctx: ProxyContext, address: string, family: 4 | 6, port: number): Promise<Socket | EgressFailureReason> {
  return new Promise((resolve) => {
    const upstream = connect({ host: address, port, family });
    track(ctx, upstream);
    upstream.setTimeout(ctx.connectTimeoutMs, () => {
      upstream.destroy();
      resolve('timeout');
    });
    upstream.once('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED' ? 'connection_refused' : 'unreachable'));
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      resolve(upstream);
    });
  });
}

/**
 * Checks the allow-list, takes an upstream slot (503 when none is free), resolves and connects:
 * the upstream socket (whose close frees the slot), or the answer to send the client. Refusals
 * and failures are reported here.
 */
async function reach(ctx: ProxyContext, target: Target): Promise<Socket | ProxyAnswer> {
  const host = displayHost(target.host);
  const listed = checkListed(ctx.opts.entries, target.host, target.port);
  if ('denied' in listed) {
    if (listed.denied === 'not_listed') report(ctx, { host, port: target.port, reason: 'not_listed' });
    return denialText(host, target.port, listed.denied);
  }
  if (ctx.upstreams >= ctx.maxConnections) return { status: 503, body: busyText(ctx.maxConnections) };
  ctx.upstreams++;
  let isHandedOver = false;
  try {
    const dest = await resolveListed(ctx.opts.entries, listed, target.port, ctx.opts.resolve);
    if ('denied' in dest) {
      report(ctx, { host, port: target.port, reason: dest.denied, ...definedAddress(dest.address) });
      return denialText(host, target.port, dest.denied, dest.address);
    }
    const upstream = await dial(ctx, dest.address, dest.family, target.port);
    if (typeof upstream === 'string') return failure(ctx, host, target.port, upstream);
    upstream.once('close', () => ctx.upstreams--);
    isHandedOver = true;
    return upstream;
  } finally {
    if (!isHandedOver) ctx.upstreams--;
  }
}

function definedAddress(address: string | undefined): { address?: string } {
  return address !== undefined ? { address } : {};
}

/** Reports an allowed destination out of reach and answers the client with what happened. */
function failure(ctx: ProxyContext, host: string, port: number, reason: EgressFailureReason): ProxyAnswer {
  report(ctx, { host, port, reason });
  return { status: reason === 'timeout' ? 504 : 502, body: unreachableText(host, port, reason) };
}

/** Hands a failure to the keeper; a listener that throws never breaks the proxy. */
function report(ctx: ProxyContext, f: EgressFailure): void {
  try {
    ctx.opts.onFailure(f);
  } catch {
    // Only a report.
  }
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
    if (client.destroyed) return void upstream.destroy();
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
    if (client.destroyed) return void upstream.destroy();
    upstream.write(upgradeHandshake(req, parsed.url));
    tunnel(client, upstream, head);
  })().catch(() => client.destroy());
}

/**
 * A plain absolute-form HTTP request: forwarded in origin form on a connection of its own to the
 * checked address, without hop-by-hop headers and with the checked Host; its response relayed.
 */
async function forwardRequest(ctx: ProxyContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const answer = ({ status, body }: ProxyAnswer): void => {
    if (res.headersSent) return void res.destroy();
    // A full proxy keeps the client's connection (its pipelined requests wait behind this answer); a refusal ends it.
    res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', ...(status === 503 ? {} : { connection: 'close' }) }).end(body);
  };
  const parsed = proxyTarget(req);
  if (!parsed) return answer({ status: 400, body: NOT_A_PROXY_REQUEST });
  const { url, target } = parsed;
  const socket = await reach(ctx, target);
  if (!(socket instanceof Socket)) return answer(socket);
  const host = displayHost(target.host);
  // The client went away while its request was being checked: nothing to forward.
  if (res.destroyed || res.writableEnded || req.socket.destroyed) return void socket.destroy();
  // Ended with the response, and with the client's connection (a pipelined response may still be queued when it goes).
  res.once('close', () => socket.destroy());
  holdFor(req.socket, socket);
  const upstream = ctx.http.request({
    createConnection: () => socket,
    method: req.method,
    path: `${url.pathname}${url.search}`,
    headers: forwardedHeaders(req, url).flat(),
    setHost: false,
  });
  let hasResponse = false;
  let isTimedOut = false;
  socket.setTimeout(ctx.connectTimeoutMs, () => {
    isTimedOut = true;
    upstream.destroy();
  });
  upstream.once('error', () => {
    socket.destroy();
    if (hasResponse) return void res.destroy();
    answer(failure(ctx, host, target.port, isTimedOut ? 'timeout' : 'upstream_error'));
  });
  upstream.once('response', (up) => {
    hasResponse = true;
    socket.setTimeout(0);
    res.writeHead(up.statusCode ?? 502, withoutHopByHop(up.rawHeaders));
    up.pipe(res);
    up.once('end', () => socket.destroy());
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
function refuseRaw(client: Duplex, { status, body }: ProxyAnswer): void {
  client.end(rawResponse(status, body));
}

/** Sends what the client already wrote past the request, then joins the two connections. */
function tunnel(client: Duplex, upstream: Socket, head: Buffer): void {
  if (head.length > 0) upstream.write(head);
  splice(client, upstream);
}

/** The upgrade request as the client wrote it, in origin form, without the proxy's own headers and with the checked Host (as forwardedHeaders). */
function upgradeHandshake(req: IncomingMessage, url: URL): string {
  const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (!/^(proxy-|host$)/i.test(req.rawHeaders[i]!)) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
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

function busyText(max: number): string {
  return `sandbox-mcp: the sandbox's egress proxy already holds its most connections (${max}); retry when some have closed.\n`;
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
