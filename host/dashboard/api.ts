// The dashboard's JSON API for one signed-in principal. Nothing here reaches a provider on its
// own: the overview lists through the principal's scoped registry, and every task read and every
// action is the matching tool's own call (get_task, cancel_task, kill_sandbox,
// set_sandbox_timeout) with that registry — the same validation, ownership check, masking and
// error categories as over MCP, by construction. A tool's error becomes its error object with an
// HTTP status for its category.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { scopeProviders } from '../access/owner-scope.js';
import type { Principal } from '../access/principal.js';
import { HOST_VERSION } from '../config/version.js';
import { callTool } from '../mcp/tool-call.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { Session } from '../mcp/session.js';
import type { ErrorCategory } from '../providers/provider-error.js';
import { WaitGate } from '../tasks/wait-gate.js';
import { definedFields } from '../util/defined-fields.js';
import { collectOverview, type Overview } from './overview.js';

/** The HTTP status of a tool error of each category. */
export const STATUS_BY_CATEGORY: Readonly<Record<ErrorCategory, number>> = {
  invalid_argument: 400,
  not_found: 404,
  // The provider's own credentials failed (an E2B key): not this browser's session, so not 401.
  authentication: 502,
  permission_denied: 403,
  rate_limited: 429,
  insufficient_resources: 429,
  conflict: 409,
  unsupported: 501,
  unavailable: 503,
  timeout: 504,
  internal: 500,
};

/**
 * Waiting reads of task output the dashboard may hold per sandbox: its own, so a person watching
 * never takes the waiting get_task calls an agent is allowed (--max-waiting-gets).
 */
export const DASHBOARD_WAITS_PER_SANDBOX = 2;
/** A listing is shared by the calls of one principal for this long (several tabs, a refresh after an action). */
const OVERVIEW_REUSE_MS = 2000;
/** Largest JSON body the API reads (sign-in, a new lifetime). */
export const MAX_API_BODY_BYTES = 16 * 1024;

/** Writes a JSON answer with the dashboard's headers. */
export type SendJson = (res: ServerResponse, status: number, body: unknown, headers?: Record<string, string>) => void;

/** The principal's identity as the page shows it. */
export function describePrincipal(p: Principal): { kind: 'operator' } | { kind: 'named'; name: string; role: string } {
  return p.kind === 'operator' ? { kind: 'operator' } : { kind: 'named', name: p.name, role: p.role };
}

/** The JSON body of a request: an object, or undefined when it is not JSON, too large or not an object. */
export async function readJsonBody(req: IncomingMessage): Promise<Record<string, unknown> | undefined> {
  if (!/^application\/json\s*(;|$)/i.test(req.headers['content-type'] ?? '')) return undefined;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_API_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Query parameters as tool arguments: digits become integers, anything else stays text for the tool's schema to refuse by name. */
function queryArgs(url: URL): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const [key, value] of url.searchParams) args[key] = /^\d{1,9}$/.test(value) ? Number(value) : value;
  return args;
}

// /api/sandboxes/:id/(kill|timeout) and /api/sandboxes/:id/tasks/:task/(output|cancel); ids are
// path segments (encodeURIComponent'd: `local:…`), checked by the tools' own schemas.
const SANDBOX_ROUTE = /^\/api\/sandboxes\/([^/]+)\/(kill|timeout)$/;
const TASK_ROUTE = /^\/api\/sandboxes\/([^/]+)\/tasks\/([^/]+)\/(output|cancel)$/;

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The API of one server process; `route` answers one call of a signed-in principal. */
export class DashboardApi {
  private readonly overviews = new Map<string, { atMs: number; overview: Promise<Overview> }>();
  private readonly waits = new WaitGate(DASHBOARD_WAITS_PER_SANDBOX);

  constructor(
    private readonly deps: ServerDeps,
    private readonly send: SendJson,
  ) {}

  /** The deps a call of `principal` runs with: its scoped registry, and the dashboard's own wait gate. */
  private depsOf(principal: Principal): ServerDeps {
    return { ...this.deps, providers: scopeProviders(this.deps.providers, principal, this.deps.owners), waits: this.waits };
  }

  /** Runs tool `name` as `principal` in a session of its own (nothing is adopted, nothing renewed). */
  private tool(principal: Principal, name: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult> {
    return callTool({ deps: this.depsOf(principal), session: new Session(), ...definedFields({ signal }) }, name, args);
  }

  private answerTool(res: ServerResponse, result: CallToolResult): void {
    if (!result.isError) return this.send(res, 200, result.structuredContent);
    const text = (result.content[0] as { text?: string } | undefined)?.text ?? '{}';
    const body = JSON.parse(text) as { error?: { category?: ErrorCategory } };
    this.send(res, STATUS_BY_CATEGORY[body.error?.category ?? 'internal'] ?? 500, body);
  }

  private overview(principal: Principal): Promise<Overview> {
    const key = principal.kind === 'operator' ? 'operator' : `${principal.role}:${principal.name}`;
    const cached = this.overviews.get(key);
    if (cached && Date.now() - cached.atMs < OVERVIEW_REUSE_MS) return cached.overview;
    const overview = collectOverview(this.depsOf(principal), principal);
    this.overviews.set(key, { atMs: Date.now(), overview });
    // A failed listing is not kept for the next caller.
    overview.catch(() => this.overviews.delete(key));
    return overview;
  }

  /** Forgets cached listings (after an action, the next refresh shows its effect). */
  private forgetOverviews(): void {
    this.overviews.clear();
  }

  /** Answers one API call of `principal` (the session and the screen were checked). */
  async route(req: IncomingMessage, res: ServerResponse, url: URL, principal: Principal): Promise<void> {
    const method = req.method ?? 'GET';
    const path = url.pathname;
    if (path === '/api/me' && method === 'GET') {
      return this.send(res, 200, { principal: describePrincipal(principal), version: HOST_VERSION });
    }
    if (path === '/api/sandboxes' && method === 'GET') return this.send(res, 200, await this.overview(principal));

    const task = TASK_ROUTE.exec(path);
    const sandbox = task ? undefined : SANDBOX_ROUTE.exec(path);
    const sandboxId = decodeSegment((task ?? sandbox)?.[1] ?? '');
    if ((!task && !sandbox) || sandboxId === undefined) return this.send(res, 404, { error: { category: 'not_found' } });

    if (task) {
      const handle = { sandbox_id: sandboxId, task_id: decodeSegment(task[2]!) ?? '' };
      if (task[3] === 'output' && method === 'GET') {
        // The reader left (tab closed, task switched): the waiting get ends with it.
        const left = new AbortController();
        res.on('close', () => left.abort());
        return this.answerTool(res, await this.tool(principal, 'get_task', { ...queryArgs(url), ...handle }, left.signal));
      }
      if (task[3] === 'cancel' && method === 'POST') {
        this.deps.log.info('dashboard action', { action: 'cancel_task' });
        this.forgetOverviews();
        // No page of output: the page follows the output itself.
        return this.answerTool(res, await this.tool(principal, 'cancel_task', { ...handle, limit: 1 }));
      }
    } else if (sandbox?.[2] === 'kill' && method === 'POST') {
      this.deps.log.info('dashboard action', { action: 'kill_sandbox' });
      this.forgetOverviews();
      return this.answerTool(res, await this.tool(principal, 'kill_sandbox', { sandbox_id: sandboxId }));
    } else if (sandbox?.[2] === 'timeout' && method === 'POST') {
      const body = await readJsonBody(req);
      if (!body)
        return this.send(res, 400, { error: { category: 'invalid_argument', suggestion: 'Send a JSON object: {"timeout": seconds}.' } });
      this.deps.log.info('dashboard action', { action: 'set_sandbox_timeout' });
      this.forgetOverviews();
      return this.answerTool(res, await this.tool(principal, 'set_sandbox_timeout', { ...body, sandbox_id: sandboxId }));
    }
    return this.send(res, 405, { error: { category: 'invalid_argument', suggestion: 'This method is not allowed here.' } });
  }
}
