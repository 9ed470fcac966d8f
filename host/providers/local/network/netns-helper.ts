// The netns helper: a small process the keeper starts inside the sandbox's network namespace
// only (nsenter -n, never its pid or mount namespace, so nothing in the sandbox can see or signal
// it), as `node <keeper script> --netns-helper`. It makes sockets there — a listening socket, or a
// connection to a port on the sandbox's loopback — and hands each to the keeper over the IPC
// channel (SCM_RIGHTS), closing its own copy: a socket keeps the namespace it was made in, so the
// keeper serves and forwards from the host's side. It reads no data, and exits with the channel.
import { connect, createServer, type Server, type Socket } from 'node:net';

/** The argument that makes the keeper's script run as the helper. */
export const NETNS_HELPER_ARG = '--netns-helper';

/** A request from the keeper: listen on the sandbox's 127.0.0.1:port, or connect to it. */
export interface NetnsRequest {
  id: number;
  op: 'listen' | 'connect';
  port: number;
}

/** The answer to a request, sent with the socket when `ok`; `code` is an errno name otherwise. */
export type NetnsReply = { id: number; ok: true } | { id: number; ok: false; code: string };

function isRequest(m: unknown): m is NetnsRequest {
  const r = m as NetnsRequest | null;
  return (
    typeof r === 'object' &&
    r !== null &&
    Number.isInteger(r.id) &&
    (r.op === 'listen' || r.op === 'connect') &&
    Number.isInteger(r.port) &&
    r.port >= 1 &&
    r.port <= 65535
  );
}

function fail(id: number, e: unknown): void {
  const code = (e as NodeJS.ErrnoException | null)?.code ?? 'EIO';
  process.send?.({ id, ok: false, code } satisfies NetnsReply);
}

/** A listening socket on the sandbox's loopback, sent to the keeper. */
function listenFor(req: NetnsRequest): void {
  const server: Server = createServer();
  server.once('error', (e) => fail(req.id, e));
  server.listen({ port: req.port, host: '127.0.0.1', exclusive: true }, () => {
    process.send?.({ id: req.id, ok: true } satisfies NetnsReply, server, () => server.close());
  });
}

/** A connection to a port on the sandbox's loopback (IPv4, else IPv6), sent to the keeper. */
function connectFor(req: NetnsRequest, hosts = ['127.0.0.1', '::1']): void {
  const socket: Socket = connect({ port: req.port, host: hosts[0]! });
  socket.once('error', (e: NodeJS.ErrnoException) => {
    socket.destroy();
    if (hosts.length > 1 && (e.code === 'ECONNREFUSED' || e.code === 'EADDRNOTAVAIL')) connectFor(req, hosts.slice(1));
    else fail(req.id, e);
  });
  socket.once('connect', () => {
    // Not read here: every byte goes to the keeper with the descriptor.
    socket.pause();
    process.send?.({ id: req.id, ok: true } satisfies NetnsReply, socket);
  });
}

/** Entry of the helper: serves requests until the keeper's channel closes. */
export function runNetnsHelper(): void {
  if (!process.send) process.exit(2);
  process.on('SIGHUP', () => {});
  process.on('SIGINT', () => {});
  process.on('disconnect', () => process.exit(0));
  process.on('message', (m: unknown) => {
    if (!isRequest(m)) return;
    if (m.op === 'listen') listenFor(m);
    else connectFor(m);
  });
}
