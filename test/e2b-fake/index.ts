// A fake of E2B on one loopback node:http server: the control-plane REST API and envd share a
// base URL (point E2B_API_URL and E2B_SANDBOX_URL at it); envd requests are told apart by their
// E2b-Sandbox-Id header. Every control-plane call is recorded; failures can be injected.
// It exercises the SDK's wire behaviour only: it does not establish real cloud support.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeEnvelope, readBody } from './connect-rpc.js';
import { rmSync } from 'node:fs';
import { handleControlPlane, sendApiError, type ControlPlaneCall, type FakeSnapshot, type FakeState } from './control-plane.js';
import { handleEnvd } from './envd.js';
import type { FakeSandbox } from './fake-sandbox.js';

export type { ControlPlaneCall, FakeSnapshot } from './control-plane.js';
export { FAKE_TEAM } from './control-plane.js';
export { FAKE_DISK_BYTES, FAKE_MEMORY_BYTES, SANDBOX_HOME, SANDBOX_MARKER_VAR } from './fake-sandbox.js';

/** A failure the fake answers instead of handling a matching request. */
export interface InjectedFailure {
  /** Matches the request path (string: exact pathname; RegExp: tested against it). */
  path: string | RegExp;
  method?: string;
  status: number;
  /** How many matching requests fail (default 1; Infinity for all). */
  times?: number;
  /** Sends an integer Retry-After header (the SDK retries a 429 only with one). */
  retryAfterS?: number;
}

export interface FakeE2bOpts {
  /** The API key the fake accepts (default `e2b_fake_test_key`). */
  apiKey?: string;
  /** Most sandboxes per list page, whatever limit the client asks (default 100). */
  pageSize?: number;
  /** envd version reported to the SDK (default 0.5.7: stdin close and octet-stream upload). */
  envdVersion?: string;
  /** Lifetime applied when create sends no timeout (default 15, E2B's API spec for NewSandbox). */
  createDefaultTimeoutS?: number;
  /** Lifetime applied when connect sends no timeout (default 300, what E2B applies). */
  connectDefaultTimeoutS?: number;
}

/** A recorded envd request (method path and sandbox), for tests that count agent pushes etc. */
export interface EnvdCall {
  path: string;
  sandboxId: string;
  /** Process/Start: the command line (cmd and args, space-joined). */
  command?: string;
  /** Process/SendInput: how many bytes of stdin it carried. */
  inputBytes?: number;
}

/** A running fake; `env` holds the variables that point the SDK (or a server process) at it. */
export interface FakeE2b {
  url: string;
  apiUrl: string;
  sandboxUrl: string;
  apiKey: string;
  env: { E2B_API_KEY: string; E2B_API_URL: string; E2B_SANDBOX_URL: string };
  calls: ControlPlaneCall[];
  envdCalls: EnvdCall[];
  injectFailure(f: InjectedFailure): void;
  clearFailures(): void;
  setPageSize(n: number): void;
  /** The live fake sandbox with this id (its host `home` directory, `endAt`, ...). */
  sandbox(id: string): FakeSandbox | undefined;
  /** The snapshot with this id (its copy of the home, how the sandbox was while it was taken). */
  snapshot(id: string): FakeSnapshot | undefined;
  close(): Promise<void>;
}

/** The raw text of injected failures: tests assert it never reaches a caller. */
export const INJECTED_MESSAGE = 'FAKE-RAW-MESSAGE see https://api.fake.invalid/internal?token=leak';

/** Starts the fake on 127.0.0.1 with an ephemeral port. */
export async function startFakeE2b(opts: FakeE2bOpts = {}): Promise<FakeE2b> {
  const state: FakeState = {
    apiKey: opts.apiKey ?? 'e2b_fake_test_key',
    pageSize: opts.pageSize ?? 100,
    envdVersion: opts.envdVersion ?? '0.5.7',
    createDefaultTimeoutS: opts.createDefaultTimeoutS ?? 15,
    connectDefaultTimeoutS: opts.connectDefaultTimeoutS ?? 300,
    sandboxes: new Map(),
    snapshots: new Map(),
  };
  const calls: ControlPlaneCall[] = [];
  const envdCalls: EnvdCall[] = [];
  let failures: Array<InjectedFailure & { left: number }> = [];

  function injected(req: IncomingMessage, url: URL, res: ServerResponse): number | undefined {
    const f = failures.find(
      (x) =>
        x.left > 0 &&
        (!x.method || x.method === req.method) &&
        (typeof x.path === 'string' ? x.path === url.pathname : x.path.test(url.pathname)),
    );
    if (!f) return undefined;
    f.left -= 1;
    const headers: Record<string, string> = f.retryAfterS !== undefined ? { 'retry-after': String(f.retryAfterS) } : {};
    return sendApiError(res, f.status, INJECTED_MESSAGE, headers);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const body = await readBody(req);
    if (req.headers['e2b-sandbox-id'] !== undefined) {
      envdCalls.push({
        path: url.pathname,
        sandboxId: String(req.headers['e2b-sandbox-id']),
        ...describeEnvdCall(url.pathname, req, body),
      });
      if (injected(req, url, res) !== undefined) return;
      return handleEnvd(state, req, url, body, res);
    }
    let parsed: unknown;
    try {
      parsed = body.length ? JSON.parse(body.toString('utf8')) : undefined;
    } catch {
      parsed = undefined;
    }
    const call: ControlPlaneCall = { method: req.method ?? '', path: url.pathname + url.search, body: parsed, status: 0 };
    calls.push(call);
    const failed = injected(req, url, res);
    if (failed !== undefined) {
      call.status = failed;
      return;
    }
    if (req.headers['x-api-key'] !== state.apiKey) {
      call.status = sendApiError(res, 401, 'Invalid API key');
      return;
    }
    const r = handleControlPlane(state, req.method ?? '', url, parsed, res);
    call.status = r.status;
    if (r.extendedLifetime !== undefined) call.extendedLifetime = r.extendedLifetime;
  }

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) sendApiError(res, 500, 'fake failure');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    apiUrl: url,
    sandboxUrl: url,
    apiKey: state.apiKey,
    env: { E2B_API_KEY: state.apiKey, E2B_API_URL: url, E2B_SANDBOX_URL: url },
    calls,
    envdCalls,
    injectFailure: (f) => failures.push({ ...f, left: f.times ?? 1 }),
    clearFailures: () => {
      failures = [];
    },
    setPageSize: (n) => {
      state.pageSize = n;
    },
    sandbox: (id) => state.sandboxes.get(id),
    snapshot: (id) => state.snapshots.get(id),
    close: async () => {
      for (const sb of state.sandboxes.values()) sb.destroy();
      state.sandboxes.clear();
      for (const snap of state.snapshots.values()) rmSync(snap.home, { recursive: true, force: true });
      state.snapshots.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What a test may want to know of a process call: a Start's command line, a SendInput's size. */
function describeEnvdCall(path: string, req: IncomingMessage, body: Buffer): Pick<EnvdCall, 'command' | 'inputBytes'> {
  try {
    if (path === '/process.Process/Start') {
      const message = (
        String(req.headers['content-type'] ?? '').startsWith('application/connect+json')
          ? decodeEnvelope(body)
          : JSON.parse(body.toString('utf8'))
      ) as {
        process?: { cmd?: string; args?: string[] };
      };
      return { command: [message.process?.cmd ?? '', ...(message.process?.args ?? [])].join(' ') };
    }
    if (path === '/process.Process/SendInput') {
      const message = JSON.parse(body.toString('utf8')) as { input?: { stdin?: string } };
      return { inputBytes: Buffer.from(message.input?.stdin ?? '', 'base64').length };
    }
  } catch {
    // not shaped as expected: nothing to note
  }
  return {};
}
