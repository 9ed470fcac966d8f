// Streamable HTTP transport at /mcp: bearer token, Host/Origin validation against the bound
// address (DNS-rebinding protection), one server + session per MCP session; DELETE and an idle
// timeout end a session with the same cleanup as stdio.
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isSamePrincipal, type Principal } from '../../access/principal.js';
import { createServer } from '../server.js';
import type { ServerDeps } from '../server-deps.js';
import type { TokenTable } from '../../access/tokens-file.js';
import { screenEnvelope, type Refused } from './message-check.js';
import { definedFields } from '../../util/defined-fields.js';

export interface HttpOpts {
  host: string;
  port: number;
  /** Extra Host header names (host or host:port) clients may use, e.g. a DNS name of this machine. */
  extraHosts?: string[];
  /** Who each bearer token authenticates. */
  tokens: TokenTable;
  /** A session with no request for this long is closed and cleaned up. */
  idleTimeoutMs: number;
  /** How often idle sessions are looked for. */
  sweepIntervalMs?: number;
  /** Answers every path but /mcp (the dashboard), given this server's Host names and port; absent: 404. */
  otherRoutes?: (req: IncomingMessage, res: ServerResponse, site: { hosts: ReadonlySet<string>; port: number }) => Promise<void>;
}

/** Largest accepted request body: a full 3 MiB upload_file chunk is 4 MiB of base64 plus JSON-RPC framing. */
const MAX_BODY_BYTES = 4 * 1024 * 1024 + 64 * 1024;

interface HttpSession {
  transport: StreamableHTTPServerTransport;
  /** The principal that opened it: only the same principal may use it. */
  principal: Principal;
  lastSeenMs: number;
  activeRequests: number;
  end: () => Promise<void>;
}

/** A running HTTP server; `close()` ends every session with its cleanup. */
export interface HttpHandle {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** The port a Host or Origin without one means, for http. */
const HTTP_DEFAULT_PORT = 80;

/** Host header values (lowercase host:port) that name the bound address, its loopback aliases and any extras. */
export function allowedHosts(host: string, port: number, extras: readonly string[] = []): Set<string> {
  const names = new Set([bracket(host)]);
  if (isLoopback(host)) for (const alias of ['127.0.0.1', 'localhost', '[::1]']) names.add(alias);
  const allowed = new Set([...names].map((n) => `${n}:${port}`.toLowerCase()));
  for (const extra of extras) allowed.add((/:\d+$/.test(extra) ? extra : `${extra}:${port}`).toLowerCase());
  // A client leaves http's default port out of Host and Origin (RFC 9110 §7.2, RFC 6454 §6.2):
  // on port 80, `http://127.0.0.1/` sends `Host: 127.0.0.1`, which names this server all the same.
  const defaultPortSuffix = `:${HTTP_DEFAULT_PORT}`;
  for (const name of [...allowed]) if (name.endsWith(defaultPortSuffix)) allowed.add(name.slice(0, -defaultPortSuffix.length));
  return allowed;
}

/** True for an address only this machine can reach. */
export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** A wildcard bind has no address a Host header could name: it needs explicit --allowed-host names. */
export function isWildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '';
}

function bracket(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** A request turned away before it reaches a session: the HTTP status and the JSON-RPC error's text. */
export interface Refusal {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** The request parts authorize reads. */
export type RequestHead = Pick<IncomingMessage, 'headers' | 'url'>;

/**
 * Who may use the MCP endpoint: a Host (and Origin, when sent) naming this server, so that a page
 * elsewhere cannot reach it through DNS rebinding; the path /mcp; a bearer token of a principal.
 * Checked in that order; the answer is the principal or the first refusal. Pure, so every branch
 * is unit-tested.
 */
export function authorize(
  req: RequestHead,
  hosts: ReadonlySet<string>,
  tokens: Pick<TokenTable, 'authenticate'>,
): { principal: Principal } | { refusal: Refusal } {
  const host = (req.headers.host ?? '').toLowerCase();
  if (!hosts.has(host)) return refuse(403, 'Forbidden: Host header does not match the server address');
  const origin = req.headers.origin?.toLowerCase();
  if (origin !== undefined && ![...hosts].some((h) => origin === `http://${h}`)) {
    return refuse(403, 'Forbidden: Origin does not match the server address');
  }
  if ((req.url ?? '').split('?')[0] !== '/mcp') return refuse(404, 'Not found: the MCP endpoint is /mcp');
  const header = req.headers.authorization;
  if (header === undefined) return unauthorized(UNAUTHORIZED.missing);
  // The auth scheme is case-insensitive (RFC 7235); the token is not.
  const token = /^bearer +(\S+)$/i.exec(header)?.[1];
  if (token === undefined) return unauthorized(UNAUTHORIZED.malformed);
  const principal = tokens.authenticate(token);
  if (!principal) return unauthorized(UNAUTHORIZED.wrong);
  return { principal };
}

/** Why a request without a principal was refused: each says which, none repeats what was sent. */
export const UNAUTHORIZED = {
  missing: 'Unauthorized: no bearer token was sent; send the header Authorization: Bearer <token>',
  malformed: 'Unauthorized: the Authorization header is not of the form Bearer <token>',
  wrong: 'Unauthorized: the bearer token is not valid for this server (a generated token changes at every server start)',
};

function unauthorized(message: string): { refusal: Refusal } {
  return refuse(401, message, { 'www-authenticate': 'Bearer' });
}

function refuse(status: number, message: string, headers?: Record<string, string>): { refusal: Refusal } {
  return { refusal: { status, message, ...definedFields({ headers }) } };
}

function sendRefusal(res: ServerResponse, refusal: Refusal): void {
  res.writeHead(refusal.status, { 'content-type': 'application/json', ...refusal.headers });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: refusal.message }, id: null }));
}

/**
 * The first message of a body (one message, or each of a batch) that screenEnvelope refuses. The
 * SDK would answer it with a generic parse error, or not at all for a message in a batch.
 */
function refuseMalformed(body: unknown): Refused | undefined {
  for (const message of Array.isArray(body) ? body : [body]) {
    const screened = screenEnvelope(message);
    if (!screened.ok) return screened;
  }
  return undefined;
}

function replyRefused(res: ServerResponse, refused: Refused): void {
  if (!refused.reply) {
    // Nothing to answer (a notification or a response): accepted and dropped, as JSON-RPC asks.
    res.writeHead(202).end();
    return;
  }
  res.writeHead(400, { 'content-type': 'application/json' });
  res.end(JSON.stringify(refused.reply));
}

/** A POST's body parsed as JSON (undefined when empty, and for other methods), or why it cannot be read. */
async function readBody(req: IncomingMessage): Promise<{ body: unknown } | { refusal: Refusal }> {
  if (req.method !== 'POST') return { body: undefined };
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) return refuse(413, 'Request body too large');
      chunks.push(chunk as Buffer);
    }
    if (size === 0) return { body: undefined };
    return { body: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  } catch {
    // Not JSON, or a body that broke off: either way there is no message to read.
    return refuse(400, 'Parse error: invalid JSON');
  }
}

/** Serves MCP over Streamable HTTP until close(). */
export async function serveHttp(deps: ServerDeps, opts: HttpOpts): Promise<HttpHandle> {
  const sessions = new Map<string, HttpSession>();
  let hosts = allowedHosts(opts.host, opts.port, opts.extraHosts);
  let port = opts.port;

  async function openSession(req: IncomingMessage, res: ServerResponse, body: unknown, principal: Principal): Promise<void> {
    const { server, connect, close } = createServer(deps, { principal, transport: 'http' });
    let entry: HttpSession | undefined;
    let ended: Promise<void> | undefined;
    const end = () =>
      (ended ??= (async () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
        await close();
        await server.close().catch(() => undefined);
      })());
    // From transport callbacks, which cannot wait: a failure is logged, never lost silently.
    const endQuietly = (): void => {
      end().catch((e: unknown) => deps.log.warn('http session cleanup failed', { unexpected: e instanceof Error ? e.name : typeof e }));
    };
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        entry = { transport, principal, lastSeenMs: Date.now(), activeRequests: 1, end };
        sessions.set(id, entry);
        // The principal's name is not a secret, and says whose session this was.
        deps.log.info('http session opened', principal.kind === 'named' ? { principal: principal.name } : {});
      },
      onsessionclosed: () => {
        endQuietly();
      },
    });
    server.onclose = endQuietly;
    await connect(transport);
    await transport.handleRequest(req, res, body);
    if (entry) entry.activeRequests--;
    else endQuietly(); // initialization failed: nothing to keep
  }

  /** A request that reaches an existing session: the same principal's only, and counted as activity. */
  async function continueSession(
    sessionId: string,
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    principal: Principal,
  ): Promise<void> {
    const entry = sessions.get(sessionId);
    // Another principal's session reads as no session at all.
    if (!entry || !isSamePrincipal(entry.principal, principal)) return sendRefusal(res, { status: 404, message: 'Session not found' });
    entry.lastSeenMs = Date.now();
    // The standalone GET stream stays open for the whole session: it is not activity.
    const isCall = req.method === 'POST';
    if (isCall) entry.activeRequests++;
    try {
      await entry.transport.handleRequest(req, res, body);
    } finally {
      if (isCall) entry.activeRequests--;
      entry.lastSeenMs = Date.now();
    }
  }

  /** authorize, read and screen the body, then hand the request to its session or open one. */
  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // Everything beside /mcp (the dashboard) screens its requests itself, Host included.
    if (opts.otherRoutes && (req.url ?? '').split('?')[0] !== '/mcp') return opts.otherRoutes(req, res, { hosts, port });
    const who = authorize(req, hosts, opts.tokens);
    if ('refusal' in who) return sendRefusal(res, who.refusal);
    const read = await readBody(req);
    if ('refusal' in read) return sendRefusal(res, read.refusal);
    const malformed = read.body === undefined ? undefined : refuseMalformed(read.body);
    if (malformed) {
      deps.log.info('refused a message', { reason: malformed.reason });
      return replyRefused(res, malformed);
    }
    const sessionId = req.headers['mcp-session-id'];
    if (typeof sessionId === 'string') return continueSession(sessionId, req, res, read.body, who.principal);
    if (req.method === 'POST' && isInitializeRequest(read.body)) return openSession(req, res, read.body, who.principal);
    return sendRefusal(res, { status: 400, message: 'Bad request: no valid session id' });
  }

  const httpServer = createHttpServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) sendRefusal(res, { status: 500, message: 'Internal error' });
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject_) => {
    httpServer.once('error', reject_);
    httpServer.listen(opts.port, opts.host, () => resolve());
  });
  port = (httpServer.address() as AddressInfo).port;
  hosts = allowedHosts(opts.host, port, opts.extraHosts);

  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const entry of sessions.values()) {
        // A long get_task wait holds a request open: that session is not idle.
        if (entry.activeRequests === 0 && now - entry.lastSeenMs > opts.idleTimeoutMs) {
          deps.log.info('http session idle; closing');
          entry
            .end()
            .catch((e: unknown) => deps.log.warn('http session cleanup failed', { unexpected: e instanceof Error ? e.name : typeof e }));
        }
      }
    },
    opts.sweepIntervalMs ?? Math.min(30_000, Math.max(100, opts.idleTimeoutMs / 4)),
  );
  sweep.unref();

  return {
    url: `http://${bracket(opts.host)}:${port}/mcp`,
    port,
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.values()].map((s) => s.end()));
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}
