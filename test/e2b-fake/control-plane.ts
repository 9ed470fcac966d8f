// The control-plane REST subset the SDK uses for our operations (E2B's openapi.yml): create (its
// egress settings validated and kept, not enforced; from a template or a snapshot), list with
// x-next-token pagination, get, kill, timeout, connect (which only ever lengthens a running
// sandbox's lifetime and resumes a paused one), pause, and snapshots (POST
// /sandboxes/{id}/snapshots: the sandbox is paused while its home is copied, then runs on; a
// name that exists gets the new content under the same template; GET /snapshots, filtered by
// source sandbox and by a name or id resolved as create resolves its templateID). A template
// reference is read as E2B's id.ParseName and alias resolution read it (E2B's infra repository):
// trimmed and lowercased, `namespace/alias:tag`; a bare one is the team's alias, else a template
// id; a namespaced one is only that namespace's. Errors carry the JSON body { code, message }.
import { copyFileSync, lstatSync, mkdirSync, readdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import { FAKE_DISK_BYTES, FAKE_MEMORY_BYTES, FakeSandbox, type FakeNetworkConfig } from './fake-sandbox.js';
import { scratchDir } from '../support/scratch.js';

/** One recorded control-plane call. `extendedLifetime` is set on connect calls. */
export interface ControlPlaneCall {
  method: string;
  path: string;
  body: unknown;
  status: number;
  extendedLifetime?: boolean;
}

/** State the control plane and envd share. */
export interface FakeState {
  apiKey: string;
  pageSize: number;
  envdVersion: string;
  createDefaultTimeoutS: number;
  connectDefaultTimeoutS: number;
  sandboxes: Map<string, FakeSandbox>;
  /** Snapshots by snapshotID. */
  snapshots: Map<string, FakeSnapshot>;
}

/** A snapshot: the id create takes, its names, and a copy of the sandbox's home when it was taken. */
export interface FakeSnapshot {
  /** Its snapshotID as E2B answers it: `team/name:default` when named, else `<templateId>:default`. */
  id: string;
  /** The underlying template's id (20 lowercase letters and digits), which create takes too. */
  templateId: string;
  names: string[];
  /** The sandbox it was taken of. */
  sandboxId: string;
  home: string;
  /** How the sandbox was while its files were copied (E2B pauses it). */
  sandboxStateDuringCopy: 'running' | 'paused';
}

/** The team slug the fake namespaces snapshot names with (E2B: `team-slug/name:tag`). */
export const FAKE_TEAM = 'fake-team';
/** E2B's snapshot names: lowercase letters, digits, '-' and '_' (the fake refuses others with a 400, as the API does). */
const SNAPSHOT_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** Go's unicode.IsSpace, which E2B's id.ParseName trims (strings.TrimSpace). */
const GO_SPACE = '[\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]';
const GO_TRIMMED = new RegExp(`^${GO_SPACE}+|${GO_SPACE}+$`, 'g');
const IDENTIFIER = /^[a-z0-9_-]+$/;
const TAG = /^[a-z0-9_.-]+$/;

/** A template reference as E2B's id.ParseName reads it; `tag` only when one is written. */
interface ParsedName {
  namespace?: string;
  alias: string;
  tag?: string;
}

/** E2B's id.ParseName: trimmed, cut at the first ':' (tag) and the first '/' (namespace), each part lowercased and checked; an error text for a 400. */
function parseName(input: string): ParsedName | string {
  const trimmed = input.replace(GO_TRIMMED, '');
  const colon = trimmed.indexOf(':');
  const identifier = colon === -1 ? trimmed : trimmed.slice(0, colon);
  const slash = identifier.indexOf('/');
  const clean = (part: string) => part.replace(GO_TRIMMED, '').toLowerCase();
  const out: ParsedName = { alias: clean(slash === -1 ? identifier : identifier.slice(slash + 1)) };
  if (colon !== -1) {
    out.tag = clean(trimmed.slice(colon + 1));
    if (!TAG.test(out.tag)) return 'invalid tag';
  }
  if (slash !== -1) {
    out.namespace = clean(identifier.slice(0, slash));
    if (!IDENTIFIER.test(out.namespace)) return 'invalid namespace';
  }
  if (!IDENTIFIER.test(out.alias)) return 'invalid template ID';
  return out;
}

/** A snapshot's alias: its first name without the team and the tag. */
function aliasOf(snap: FakeSnapshot): string | undefined {
  return snap.names[0]?.replace(`${FAKE_TEAM}/`, '').replace(/:[^:]*$/, '');
}

/**
 * The snapshot a parsed reference resolves to, as E2B's alias resolution does: a namespaced
 * alias only in that namespace; a bare one as the team's alias, else as a template id (E2B also
 * tries its public aliases in between, which the fake has none of). 'elsewhere': a template the
 * fake does not model (another namespace, or a bare name that is no snapshot).
 */
function resolveSnapshot(state: FakeState, ref: ParsedName): FakeSnapshot | undefined | 'elsewhere' {
  const snaps = [...state.snapshots.values()];
  if (ref.namespace !== undefined && ref.namespace !== FAKE_TEAM) return 'elsewhere';
  const byAlias = snaps.find((snap) => aliasOf(snap) === ref.alias);
  if (byAlias || ref.namespace !== undefined) return byAlias;
  return snaps.find((snap) => snap.templateId === ref.alias) ?? 'elsewhere';
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): number {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(body === undefined ? undefined : JSON.stringify(body));
  return status;
}

/** The error body E2B's API returns; the SDK reads "not found" from `code`, not the HTTP status. */
export function sendApiError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): number {
  return sendJson(res, status, { code: status, message }, headers);
}

function detail(sb: FakeSandbox): Record<string, unknown> {
  return {
    templateID: sb.templateId,
    sandboxID: sb.id,
    clientID: 'fake-client',
    startedAt: sb.startedAt.toISOString(),
    endAt: sb.endAt.toISOString(),
    cpuCount: 2,
    memoryMB: FAKE_MEMORY_BYTES / 1024 / 1024,
    diskSizeMB: FAKE_DISK_BYTES / 1024 / 1024,
    metadata: sb.metadata,
    state: sb.state,
    envdVersion: sb.envdVersion,
    envdAccessToken: sb.accessToken,
    domain: null,
    // Only what the create set, as E2B's SandboxDetail carries it.
    ...(sb.allowInternetAccess !== null ? { allowInternetAccess: sb.allowInternetAccess } : {}),
    ...(sb.network !== null ? { network: sb.network } : {}),
  };
}

/** An address or CIDR block (denyOut's only forms). */
function isAddressOrCidr(text: string): boolean {
  const [address, prefix, extra] = text.split('/');
  if (extra !== undefined || !address || !isIP(address)) return false;
  if (prefix === undefined) return true;
  return /^\d{1,3}$/.test(prefix) && Number(prefix) <= (isIP(address) === 4 ? 32 : 128);
}

/** A domain name, optionally `*.`-prefixed (allowOut's third form). */
function isDomain(text: string): boolean {
  return /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i.test(text);
}

/**
 * The create's `network` (SandboxNetworkConfig) as E2B validates its egress lists: allowOut holds
 * addresses, CIDR blocks or domains; denyOut addresses or CIDR blocks only. An error text for a 400.
 */
function networkField(b: Record<string, unknown>): FakeNetworkConfig | undefined | string {
  if (b.network === undefined) return undefined;
  const n = b.network as Record<string, unknown> | null;
  if (typeof n !== 'object' || n === null || Array.isArray(n)) return 'network must be an object';
  const out: FakeNetworkConfig = {};
  for (const [key, valid] of [
    ['allowOut', (t: string) => isAddressOrCidr(t) || isDomain(t)],
    ['denyOut', isAddressOrCidr],
  ] as const) {
    const list = n[key];
    if (list === undefined) continue;
    if (!Array.isArray(list) || !list.every((t) => typeof t === 'string' && valid(t))) return `network.${key} has an invalid entry`;
    out[key] = list as string[];
  }
  return out;
}

function connectBody(sb: FakeSandbox): Record<string, unknown> {
  return {
    templateID: sb.templateId,
    sandboxID: sb.id,
    clientID: 'fake-client',
    envdVersion: sb.envdVersion,
    envdAccessToken: sb.accessToken,
    domain: null,
  };
}

/** E2B's longest sandbox lifetime (Pro tier): longer timeouts are refused, not clamped. */
export const MAX_TIMEOUT_S = 86_400;
const STATES = ['running', 'paused'];

/**
 * A request body's `timeout` as the API validates it (int32, minimum 0, at most the tier's
 * maximum): the number, undefined when absent and optional, or an error text for a 400.
 */
function timeoutField(b: Record<string, unknown>, required: boolean): number | undefined | string {
  if (b.timeout === undefined) return required ? 'timeout is required' : undefined;
  const t = b.timeout;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > MAX_TIMEOUT_S) return 'timeout must be an integer in [0, 86400]';
  return t;
}

/**
 * The `metadata` query of GET /v2/sandboxes: "key=value&…" with each key and value URL-encoded
 * (the SDK encodes them, then URLSearchParams encodes the whole); a sandbox matches when its
 * metadata holds every pair, as E2B filters before paginating.
 */
function metadataQuery(param: string | null): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(param ?? '')) pairs[decodeURIComponent(k)] = decodeURIComponent(v);
  return pairs;
}

/** Handles one control-plane request; returns the status sent and, for connect, whether it extended the lifetime. */
export function handleControlPlane(
  state: FakeState,
  method: string,
  url: URL,
  body: unknown,
  res: ServerResponse,
): { status: number; extendedLifetime?: boolean } {
  const p = url.pathname;
  const b = (body ?? {}) as Record<string, unknown>;
  if (method === 'POST' && p === '/v2/sandboxes') {
    const t = timeoutField(b, false);
    if (typeof t === 'string') return { status: sendApiError(res, 400, t) };
    if (typeof b.templateID !== 'string' || b.templateID === '') return { status: sendApiError(res, 400, 'templateID is required') };
    const envs = b.envVars ?? {};
    if (typeof envs !== 'object' || Object.values(envs as object).some((v) => typeof v !== 'string')) {
      return { status: sendApiError(res, 400, 'envVars must map names to strings') };
    }
    if (b.allow_internet_access !== undefined && typeof b.allow_internet_access !== 'boolean') {
      return { status: sendApiError(res, 400, 'allow_internet_access must be a boolean') };
    }
    const network = networkField(b);
    if (typeof network === 'string') return { status: sendApiError(res, 400, network) };
    const timeoutS = t ?? state.createDefaultTimeoutS;
    const ref = parseName(b.templateID);
    if (typeof ref === 'string') return { status: sendApiError(res, 400, ref) };
    const resolved = resolveSnapshot(state, ref);
    if (resolved === undefined) return { status: sendApiError(res, 404, 'template not found') };
    // A snapshot has builds of the tag `default` only.
    if (resolved !== 'elsewhere' && ref.tag !== undefined && ref.tag !== 'default') {
      return { status: sendApiError(res, 404, 'tag not found') };
    }
    const snapshot = resolved === 'elsewhere' ? undefined : resolved;
    const sb = new FakeSandbox({
      templateId: b.templateID,
      timeoutS,
      envs: envs as Record<string, string>,
      metadata: (b.metadata as Record<string, string>) ?? {},
      envdVersion: state.envdVersion,
      ...(typeof b.allow_internet_access === 'boolean' ? { allowInternetAccess: b.allow_internet_access } : {}),
      ...(network !== undefined ? { network } : {}),
      ...(snapshot ? { homeFrom: snapshot.home } : {}),
      onExpire: (s) => {
        s.destroy();
        state.sandboxes.delete(s.id);
      },
    });
    state.sandboxes.set(sb.id, sb);
    return { status: sendJson(res, 201, connectBody(sb)) };
  }
  if (method === 'GET' && p === '/v2/sandboxes') {
    const states = (url.searchParams.get('state') ?? 'running,paused').split(',');
    if (states.some((x) => !STATES.includes(x))) return { status: sendApiError(res, 400, 'invalid state') };
    const rawLimit = url.searchParams.get('limit') ?? '100';
    if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 100)
      return { status: sendApiError(res, 400, 'limit must be in [1, 100]') };
    // The server may return fewer than asked (pageSize), never more.
    const limit = Math.min(Number(rawLimit), state.pageSize);
    const start = Number(url.searchParams.get('nextToken') ? Buffer.from(url.searchParams.get('nextToken')!, 'base64url').toString() : 0);
    const metadata = metadataQuery(url.searchParams.get('metadata'));
    const all = [...state.sandboxes.values()]
      .filter((s) => states.includes(s.state))
      .filter((s) => Object.entries(metadata).every(([k, v]) => s.metadata[k] === v))
      .sort((x, y) => y.startedAt.getTime() - x.startedAt.getTime() || (x.id < y.id ? -1 : 1));
    const page = all.slice(start, start + limit).map((s) => {
      const { envdAccessToken: _t, domain: _d, allowInternetAccess: _a, network: _n, ...listed } = detail(s);
      return listed;
    });
    const headers: Record<string, string> = {};
    if (start + limit < all.length) headers['x-next-token'] = Buffer.from(String(start + limit)).toString('base64url');
    return { status: sendJson(res, 200, page, headers) };
  }
  if (method === 'GET' && p === '/snapshots') return { status: listSnapshots(state, url, res) };
  // The routes of the spec (and the SDK's /v2 connect); nothing else answers.
  const m =
    /^\/sandboxes\/([^/]+)(?:\/(timeout|connect|pause|snapshots|metrics))?$/.exec(p) ?? /^\/v2\/sandboxes\/([^/]+)\/(connect)$/.exec(p);
  const sb = m ? state.sandboxes.get(decodeURIComponent(m[1]!)) : undefined;
  if (!m) return { status: sendApiError(res, 404, 'no such route') };
  if (!sb) return { status: sendApiError(res, 404, `sandbox ${m[1]} not found`) };
  const action = m[2];
  if (action === undefined && method === 'GET') return { status: sendJson(res, 200, detail(sb)) };
  if (action === undefined && method === 'DELETE') {
    sb.destroy();
    state.sandboxes.delete(sb.id);
    res.writeHead(204).end();
    return { status: 204 };
  }
  if (action === 'timeout' && method === 'POST') {
    const t = timeoutField(b, true);
    if (typeof t !== 'number') return { status: sendApiError(res, 400, t ?? 'timeout is required') };
    sb.setTimeoutS(t);
    res.writeHead(204).end();
    return { status: 204 };
  }
  if (action === 'metrics' && method === 'GET') {
    // One sample taken now, if now is within [start, end] (Unix seconds, both optional).
    const nowS = Math.floor(Date.now() / 1000);
    const bound = (name: string) => (url.searchParams.has(name) ? Number(url.searchParams.get(name)) : undefined);
    const [start, end] = [bound('start'), bound('end')];
    if ([start, end].some((t) => t !== undefined && !(Number.isInteger(t) && t >= 0))) {
      return { status: sendApiError(res, 400, 'start and end must be Unix seconds') };
    }
    const isInside = (start === undefined || start <= nowS) && (end === undefined || nowS <= end);
    return { status: sendJson(res, 200, isInside ? [sb.metric(nowS)] : []) };
  }
  if (action === 'pause' && method === 'POST') {
    if (sb.state === 'paused') return { status: sendApiError(res, 409, 'already paused') };
    sb.state = 'paused';
    res.writeHead(204).end();
    return { status: 204 };
  }
  if (action === 'snapshots' && method === 'POST') {
    if (body === undefined) return { status: sendApiError(res, 400, 'request body is required') };
    if (b.name !== undefined && (typeof b.name !== 'string' || !SNAPSHOT_NAME.test(b.name))) {
      return { status: sendApiError(res, 400, 'invalid snapshot name') };
    }
    const name = typeof b.name === 'string' ? `${FAKE_TEAM}/${b.name}:default` : undefined;
    const existing = name ? [...state.snapshots.values()].find((s) => s.names.includes(name)) : undefined;
    const templateId = existing?.templateId ?? newTemplateId();
    const id = existing?.id ?? name ?? `${templateId}:default`;
    const was = sb.state;
    sb.state = 'paused';
    const home = scratchDir('fake-e2b-snapshot-');
    // E2B pauses the sandbox's VM for the copy; the fake's processes run on, so its home is copied
    // as it changes (the resident agent's supervisors make and remove files and FIFOs there).
    copyLiveTree(sb.home, home);
    const sandboxStateDuringCopy = sb.state;
    sb.state = was;
    if (existing) rmSync(existing.home, { recursive: true, force: true });
    state.snapshots.set(id, { id, templateId, names: name ? [name] : [], sandboxId: sb.id, home, sandboxStateDuringCopy });
    return { status: sendJson(res, 201, { snapshotID: id, names: name ? [name] : [] }) };
  }
  if (action === 'connect' && method === 'POST') {
    // TTL is only extended: a shorter request leaves end_at alone; no timeout means the default
    // (the SDK sends `{}` when the caller names none).
    const t = timeoutField(b, false);
    if (typeof t === 'string') return { status: sendApiError(res, 400, t) };
    const timeoutS = t ?? state.connectDefaultTimeoutS;
    const wasPaused = sb.state === 'paused';
    sb.state = 'running';
    const requestedEnd = Date.now() + timeoutS * 1000;
    const extendedLifetime = wasPaused || requestedEnd > sb.endAt.getTime();
    if (extendedLifetime) sb.setTimeoutS(timeoutS);
    return { status: sendJson(res, wasPaused ? 201 : 200, connectBody(sb)), extendedLifetime };
  }
  return { status: sendApiError(res, 405, 'method not allowed') };
}

/** A new template id as E2B makes them (id.Generate: lowercase letters and digits; 20 here). */
function newTemplateId(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return [...randomBytes(20)].map((byte) => alphabet[byte % alphabet.length]).join('');
}

/**
 * GET /snapshots: the team's snapshots, newest first, `limit` (1-100, default 100) a page with
 * x-next-token; `sandboxID` keeps those taken of that sandbox, `name` those the reference
 * resolves to (as create resolves it; a tag written keeps that tag's builds). A reference E2B
 * cannot parse, or one in another team's namespace, is a 400; one that names nothing, an empty list.
 */
function listSnapshots(state: FakeState, url: URL, res: ServerResponse): number {
  const rawLimit = url.searchParams.get('limit') ?? '100';
  if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1 || Number(rawLimit) > 100) return sendApiError(res, 400, 'limit must be in [1, 100]');
  const token = url.searchParams.get('nextToken');
  const start = token ? Number(Buffer.from(token, 'base64url').toString()) : 0;
  if (!Number.isInteger(start) || start < 0) return sendApiError(res, 400, 'Invalid next token');
  let snaps = [...state.snapshots.values()].reverse();
  const sandboxId = url.searchParams.get('sandboxID');
  if (sandboxId !== null) snaps = snaps.filter((snap) => snap.sandboxId === sandboxId);
  const name = url.searchParams.get('name');
  if (name !== null) {
    const ref = parseName(name);
    if (typeof ref === 'string') return sendApiError(res, 400, `Invalid name: ${ref}`);
    if (ref.namespace !== undefined && ref.namespace !== FAKE_TEAM) return sendApiError(res, 400, 'namespace must match your team');
    const resolved = resolveSnapshot(state, ref);
    const isTagged = resolved !== undefined && resolved !== 'elsewhere' && (ref.tag === undefined || ref.tag === 'default');
    snaps = snaps.filter((snap) => isTagged && snap === resolved);
  }
  const limit = Math.min(Number(rawLimit), state.pageSize);
  const page = snaps.slice(start, start + limit).map((snap) => ({ snapshotID: snap.id, names: snap.names }));
  const headers: Record<string, string> = {};
  if (start + limit < snaps.length) headers['x-next-token'] = Buffer.from(String(start + limit)).toString('base64url');
  return sendJson(res, 200, page, headers);
}

/**
 * Copies the tree at `from` into the existing directory `to` while its processes may change it:
 * an entry gone between the listing and its copy is left out, and so are FIFOs and sockets (node
 * cannot make them; E2B's snapshot keeps them). Files keep their mode, links their target.
 */
function copyLiveTree(from: string, to: string): void {
  let names: string[];
  try {
    names = readdirSync(from);
  } catch (err) {
    if (isGone(err)) return;
    throw err;
  }
  for (const name of names) {
    const src = path.join(from, name);
    const dst = path.join(to, name);
    try {
      const st = lstatSync(src);
      if (st.isDirectory()) {
        mkdirSync(dst, { mode: st.mode & 0o7777 });
        copyLiveTree(src, dst);
      } else if (st.isSymbolicLink()) symlinkSync(readlinkSync(src), dst);
      else if (st.isFile()) copyFileSync(src, dst);
    } catch (err) {
      if (!isGone(err)) throw err;
    }
  }
}

/** True for the errors of an entry removed, or replaced by another kind of thing, while it was copied. */
function isGone(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
