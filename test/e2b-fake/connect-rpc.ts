// The Connect protocol with JSON, as envd speaks it: unary calls are plain JSON POSTs; server
// streaming frames every message in a 5-byte envelope (flags, big-endian length) and ends with an
// end-of-stream frame (flag 0x02) that carries the error, if any.
import type { IncomingMessage, ServerResponse } from 'node:http';

/** Connect error codes the fake uses, with the HTTP status a unary error carries. */
export const CONNECT_HTTP_STATUS = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  already_exists: 409,
  failed_precondition: 412,
  resource_exhausted: 429,
  unimplemented: 404,
  internal: 500,
  unavailable: 503,
  deadline_exceeded: 504,
} as const;
export type ConnectCode = keyof typeof CONNECT_HTTP_STATUS;

/** An error an RPC handler throws to answer with a Connect error. */
export class RpcError extends Error {
  constructor(
    readonly code: ConnectCode,
    message: string,
  ) {
    super(message);
  }
}

/** Reads a whole request body. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Decodes the single enveloped JSON message of a server-streaming request. */
export function decodeEnvelope(body: Buffer): unknown {
  if (body.length < 5) throw new RpcError('invalid_argument', 'missing envelope');
  const len = body.readUInt32BE(1);
  return JSON.parse(body.subarray(5, 5 + len).toString('utf8') || '{}');
}

/** Encodes one enveloped frame. */
export function envelope(message: unknown, flags = 0): Buffer {
  const json = Buffer.from(JSON.stringify(message), 'utf8');
  const head = Buffer.alloc(5);
  head.writeUInt8(flags, 0);
  head.writeUInt32BE(json.length, 1);
  return Buffer.concat([head, json]);
}

/** Answers a unary call with JSON or a Connect error. */
export function sendUnary(res: ServerResponse, result: unknown): void {
  if (result instanceof RpcError) {
    res.writeHead(CONNECT_HTTP_STATUS[result.code], { 'content-type': 'application/json' });
    res.end(JSON.stringify({ code: result.code, message: result.message }));
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(result ?? {}));
}

/** A server stream: send messages, then end it (optionally with an error). */
export interface RpcStream {
  send(message: unknown): void;
  end(error?: RpcError): void;
  readonly ended: boolean;
  onClose(fn: () => void): void;
}

/** Opens a server-streaming response. */
export function openStream(res: ServerResponse): RpcStream {
  res.writeHead(200, { 'content-type': 'application/connect+json' });
  let ended = false;
  const closers: Array<() => void> = [];
  res.on('close', () => {
    ended = true;
    for (const fn of closers) fn();
  });
  return {
    send(message) {
      if (!ended) res.write(envelope(message));
    },
    end(error) {
      if (ended) return;
      ended = true;
      res.end(envelope(error ? { error: { code: error.code, message: error.message } } : {}, 0x02));
    },
    get ended() {
      return ended;
    },
    onClose(fn) {
      closers.push(fn);
    },
  };
}
