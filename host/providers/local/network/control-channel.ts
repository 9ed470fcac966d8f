// The one way to ask a running keeper for something beyond "re-read the deadline" (SIGUSR1): a
// Unix socket in the sandbox's state directory (0700, hidden inside the sandbox, so only this
// user's servers reach it). One JSON line in, one JSON line out per connection. A restarted
// server finds it where the last one did, and the keeper answers from what it holds — so an
// exposed port keeps its URL across server restarts, and the egress proxy's recent failures are
// there for whichever server ran the command that met them.
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { CONTROL_SOCKET } from '../sandbox/state-dir.js';
import { parseFailureRecord, type EgressFailureRecord } from './egress-failures.js';

/**
 * What a server may ask: expose the sandbox's `port` on the host's loopback, or the egress
 * proxy's failures from `since_ms` up to (not including) `until_ms` (epoch ms; open-ended without).
 */
export type ControlRequest = { op: 'expose'; port: number } | { op: 'failures'; since_ms: number; until_ms?: number };

/** Why a request failed, as the keeper reports it (an older keeper answers bad_request to an op it does not know). */
export type ControlFailure = 'bad_request' | 'too_many_ports' | 'listen_failed' | 'internal';

/** The keeper's answer: the exposed port's host port, or the failures asked for. */
export type ControlReply =
  { ok: true; host_port: number } | { ok: true; failures: EgressFailureRecord[] } | { ok: false; code: ControlFailure };

/** The longest request a keeper reads. */
const MAX_REQUEST_BYTES = 1024;
/** The longest reply a server reads (the failures: at most 256 records of a few hundred bytes). */
const MAX_REPLY_BYTES = 256 * 1024;
/** The longest path a Unix socket address holds (sun_path, less its terminating NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

const isTime = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function parseRequest(line: string): ControlRequest | null {
  try {
    const r = JSON.parse(line) as Record<string, unknown>;
    if (r.op === 'expose') {
      return typeof r.port === 'number' && Number.isInteger(r.port) && r.port >= 1 && r.port <= 65535
        ? { op: 'expose', port: r.port }
        : null;
    }
    if (r.op === 'failures' && isTime(r.since_ms) && (r.until_ms === undefined || isTime(r.until_ms))) {
      return { op: 'failures', since_ms: r.since_ms, ...(r.until_ms !== undefined ? { until_ms: r.until_ms } : {}) };
    }
    return null;
  } catch {
    return null;
  }
}

/** Reads one line (at most `maxBytes`) from `socket`; null when it ends, errs or overflows first. */
function readLine(socket: Socket, timeoutMs: number, maxBytes: number): Promise<string | null> {
  return new Promise((resolve) => {
    let text = '';
    const done = (line: string | null): void => {
      socket.setTimeout(0);
      socket.removeAllListeners('data');
      resolve(line);
    };
    socket.setTimeout(timeoutMs, () => done(null));
    socket.on('data', (b: Buffer) => {
      text += b.toString('utf8');
      const nl = text.indexOf('\n');
      if (nl >= 0) done(text.slice(0, nl));
      else if (text.length > maxBytes) done(null);
    });
    socket.once('end', () => done(null));
    socket.once('error', () => done(null));
  });
}

/**
 * The keeper's side: serves requests on the control socket of the sandbox directory `dir`. The
 * keeper's working directory becomes `dir`, so the socket is bound by its short relative name
 * whatever the length of the state directory's path.
 */
export function serveControl(dir: string, handle: (req: ControlRequest) => Promise<ControlReply>): Promise<{ close(): void }> {
  process.chdir(dir);
  const server: Server = createServer((socket) => {
    socket.on('error', () => socket.destroy());
    void readLine(socket, 10_000, MAX_REQUEST_BYTES)
      .then(async (line) => {
        const req = line === null ? null : parseRequest(line);
        const reply: ControlReply = req
          ? await handle(req).catch(() => ({ ok: false, code: 'internal' }) as const)
          : { ok: false, code: 'bad_request' };
        socket.end(JSON.stringify(reply) + '\n');
      })
      .catch(() => socket.destroy());
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(CONTROL_SOCKET, () => {
      server.off('error', reject);
      resolve({ close: () => server.close() });
    });
  });
}

/** Where a server reaches the keeper's control socket: its path, or through the keeper's working directory when too long. */
export function controlSocketPath(dir: string, keeperPid: number): string {
  const direct = join(dir, CONTROL_SOCKET);
  return Buffer.byteLength(direct) <= MAX_SOCKET_PATH_BYTES ? direct : `/proc/${keeperPid}/cwd/${CONTROL_SOCKET}`;
}

/** The server's side: sends one request; resolves with the reply, or null when the keeper could not be reached or did not answer. */
export function requestControl(path: string, req: ControlRequest, timeoutMs = 10_000): Promise<ControlReply | null> {
  return new Promise((resolve) => {
    const socket = connect(path);
    socket.once('error', () => resolve(null));
    socket.once('connect', () => {
      socket.write(JSON.stringify(req) + '\n');
      readLine(socket, timeoutMs, MAX_REPLY_BYTES).then(
        (line) => {
          socket.destroy();
          try {
            resolve(line === null ? null : (JSON.parse(line) as ControlReply));
          } catch {
            resolve(null);
          }
        },
        () => resolve(null),
      );
    });
  });
}

/** The keeper's egress failures in a span, read through its control socket; null when it could not say (gone, or an older keeper). */
export async function requestFailures(path: string, sinceMs: number, untilMs?: number): Promise<EgressFailureRecord[] | null> {
  const reply = await requestControl(
    path,
    { op: 'failures', since_ms: sinceMs, ...(untilMs !== undefined ? { until_ms: untilMs } : {}) },
    5_000,
  );
  if (reply === null || !reply.ok || !('failures' in reply) || !Array.isArray(reply.failures)) return null;
  return reply.failures.map(parseFailureRecord).filter((r) => r !== null);
}
