// The dashboard: a page and its JSON API for people watching what the agents do, mounted by the
// HTTP transport beside /mcp (sandbox-mcp http) or served alone on loopback (sandbox-mcp
// dashboard). Every request passes the screen (screen.ts) first; the API then needs a session
// (sessions.ts), opened by signing in with a token of this server or a one-time code. The log
// names who signed in and which action ran, never a token, code, cookie or CSRF token.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { OPERATOR, type Principal } from '../access/principal.js';
import type { TokenTable } from '../access/tokens-file.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { allowedHosts } from '../mcp/transports/http.js';
import { DashboardApi, describePrincipal, readJsonBody } from './api.js';
import { assetAt } from './assets.js';
import { COMMON_HEADERS, screenRequest, type ScreenRefusal } from './screen.js';
import {
  clearedCookie,
  CSRF_HEADER,
  OneTimeCode,
  readCookie,
  sessionCookie,
  SessionStore,
  SignInLimiter,
  type SessionRefusal,
} from './sessions.js';

/** Where the dashboard is being served: this server's Host names (lowercase host:port) and its port. */
export interface DashboardSite {
  hosts: ReadonlySet<string>;
  port: number;
}

/** How people sign in. */
export interface DashboardOpts {
  /** Tokens of this server (sandbox-mcp http): each signs in as its principal. */
  tokens?: TokenTable;
  /** One-time codes (sandbox-mcp dashboard): each signs in as the operator, once. */
  oneTimeCode?: OneTimeCode;
}

/** The dashboard of one server process. */
export interface Dashboard {
  /** Answers one request (any path but /mcp). */
  handle(req: IncomingMessage, res: ServerResponse, site: DashboardSite): Promise<void>;
}

const REFUSAL_TEXT: Record<ScreenRefusal | SessionRefusal, string> = {
  host: 'The Host header does not name this server.',
  origin: 'Requests that change something must come from this page (Origin).',
  cross_site: 'Requests must come from this page (Sec-Fetch-Site).',
  no_session: 'Sign in first.',
  bad_csrf: 'Sign in again (the page did not send its session token).',
};

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8', ...headers });
  res.end(JSON.stringify(body));
}

function refuse(res: ServerResponse, reason: ScreenRefusal | SessionRefusal): void {
  const status = reason === 'no_session' || reason === 'bad_csrf' ? 401 : 403;
  sendJson(res, status, {
    error: { category: status === 401 ? 'authentication' : 'permission_denied', code: reason, suggestion: REFUSAL_TEXT[reason] },
  });
}

/** Creates the dashboard over the process's deps. */
export function createDashboard(deps: ServerDeps, opts: DashboardOpts): Dashboard {
  const sessions = new SessionStore();
  const limiter = new SignInLimiter();
  const api = new DashboardApi(deps, sendJson);

  async function signIn(req: IncomingMessage, res: ServerResponse, site: DashboardSite): Promise<void> {
    const body = await readJsonBody(req);
    let principal: Principal | undefined;
    let via: 'token' | 'one-time code' | undefined;
    if (typeof body?.token === 'string' && opts.tokens) {
      principal = opts.tokens.authenticate(body.token);
      via = 'token';
    } else if (typeof body?.code === 'string' && opts.oneTimeCode?.redeem(body.code)) {
      principal = OPERATOR;
      via = 'one-time code';
    }
    // Failures are limited, never the right credentials: else anyone who can reach the port keeps the operator out.
    if (!principal && limiter.isBlocked()) {
      return sendJson(res, 429, { error: { category: 'rate_limited', suggestion: 'Too many failed sign-ins: wait a minute.' } });
    }
    if (!principal) {
      limiter.fail();
      deps.log.info('dashboard sign-in refused');
      return sendJson(res, 401, { error: { category: 'authentication', code: 'bad_credentials', suggestion: 'That was not accepted.' } });
    }
    const session = sessions.open(principal);
    deps.log.info('dashboard sign-in', { via, ...(principal.kind === 'named' ? { principal: principal.name } : {}) });
    sendJson(
      res,
      200,
      { principal: describePrincipal(principal), csrf: session.csrf },
      {
        'set-cookie': sessionCookie(site.port, session.cookie, session.maxAgeS),
      },
    );
  }

  async function handle(req: IncomingMessage, res: ServerResponse, site: DashboardSite): Promise<void> {
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    const isApi = url.pathname.startsWith('/api/');
    const refused = screenRequest({ method, headers: req.headers }, site.hosts, isApi);
    if (refused) {
      deps.log.info('refused a dashboard request', { reason: refused });
      return refuse(res, refused);
    }
    if (!isApi) {
      const asset = method === 'GET' ? assetAt(url.pathname) : undefined;
      if (!asset)
        return sendJson(res, 404, { error: { category: 'not_found', suggestion: 'The dashboard is at /, the MCP endpoint at /mcp.' } });
      res.writeHead(200, { ...COMMON_HEADERS, 'content-type': asset.type });
      return void res.end(asset.bytes);
    }
    if (url.pathname === '/api/session' && method === 'POST') return signIn(req, res, site);
    const cookie = readCookie(req.headers.cookie, site.port);
    const csrf = req.headers[CSRF_HEADER];
    const checked = sessions.check(cookie, typeof csrf === 'string' ? csrf : undefined);
    if ('refusal' in checked) return refuse(res, checked.refusal);
    if (url.pathname === '/api/session' && method === 'DELETE') {
      sessions.close(cookie);
      return sendJson(res, 200, {}, { 'set-cookie': clearedCookie(site.port) });
    }
    return api.route(req, res, url, checked.principal);
  }

  return { handle };
}

/** A dashboard served alone (sandbox-mcp dashboard). */
export interface DashboardServer {
  /** The page's address, e.g. http://127.0.0.1:41234/ */
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Serves `dashboard` alone on 127.0.0.1:`port` (0: any free port) until close(). */
export async function listenDashboard(dashboard: Dashboard, port: number, onError: (e: unknown) => void): Promise<DashboardServer> {
  const host = '127.0.0.1';
  let site: DashboardSite = { hosts: new Set(), port };
  const server = createServer((req, res) => {
    dashboard.handle(req, res, site).catch((e: unknown) => {
      onError(e);
      if (!res.headersSent) sendJson(res, 500, { error: { category: 'internal' } });
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  site = { hosts: allowedHosts(host, bound), port: bound };
  return {
    url: `http://${host}:${bound}/`,
    port: bound,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
