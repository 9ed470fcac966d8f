// The keeper's relay between servers and its sandbox's resident agent. Servers connect to the
// Unix socket `agent.sock` in the sandbox's state directory (0700: only this user's servers);
// the resident reads one stream of frames on its stdin and answers on its stdout
// (shared/resident.ts). The relay gives every request a number of its own on the way in and
// gives it back its caller's on the way out, so several servers share one resident; a server
// that goes away has its requests aborted (`disconnected`: the resident keeps what they started
// as tasks). Frames are only renumbered, never parsed beyond their `{"id":N,` prefix: the relay
// trusts the resident no more than before (servers validate every answer), and a line that is
// not shaped like a frame, or is too long, ends the resident's stream or the connection.
import { createServer, type Server, type Socket } from 'node:net';
import { chmodSync } from 'node:fs';
import { lineSplitter } from '../../../../shared/frame-lines.js';

/** What the relay needs of the resident: a way to write to it (lines are bytes as latin1 text). */
export interface ResidentLink {
  write(line: string): void;
}

/** `{"id":N,` then the rest: the only part of a frame the relay reads. */
const FRAME_PREFIX = /^\{"id":(\d{1,15}),/;
/** A server's frame: a request, or an abort. */
const CLIENT_FRAME = /^\{"id":(\d{1,15}),"(request|abort)":/;

interface Connection {
  socket: Socket;
  /** The caller's ids of its requests in flight, by the relay's id. */
  readonly inFlight: Map<number, number>;
  /** The relay's id of each of its requests in flight, by the caller's. */
  readonly byCallerId: Map<number, number>;
  isGreeted: boolean;
}

/** The relay of one sandbox (see the module comment). */
export class ResidentRelay {
  private server: Server | null = null;
  private readonly connections = new Set<Connection>();
  /** Where each request in flight came from, by the relay's id; null once its connection is gone. */
  private readonly routes = new Map<number, Connection | null>();
  private nextId = 1;
  private link: ResidentLink | null = null;
  private greeting: string | null = null;

  /** Listens on `path` (relative to the working directory: the keeper's is the sandbox directory). */
  listen(path: string): Promise<void> {
    const server = createServer((socket) => this.accept(socket));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        chmodSync(path, 0o600);
        resolve();
      });
    });
  }

  /** A resident is up: frames go to `link`; connections get `greeting` (its first line) first. */
  attach(link: ResidentLink, greeting: string): void {
    this.link = link;
    this.greeting = greeting;
    for (const conn of this.connections) this.greet(conn);
  }

  /** The resident is gone: every connection ends (their requests' outcomes are unknown to them). */
  detach(): void {
    this.link = null;
    this.greeting = null;
    this.routes.clear();
    for (const conn of this.connections) conn.socket.destroy();
    this.connections.clear();
  }

  /** One line the resident wrote (not its greeting); false when it is not shaped like a frame. */
  fromResident(line: string): boolean {
    const m = FRAME_PREFIX.exec(line);
    if (!m) return false;
    const id = Number(m[1]);
    const conn = this.routes.get(id);
    if (conn === undefined) return true; // an answer nobody waits for (its caller went away)
    this.routes.delete(id);
    if (conn === null) return true;
    const callerId = conn.inFlight.get(id);
    conn.inFlight.delete(id);
    if (callerId === undefined) return true;
    conn.byCallerId.delete(callerId);
    if (!conn.socket.destroyed) conn.socket.write(`{"id":${callerId},${line.slice(m[0].length)}\n`, 'latin1');
    return true;
  }

  /** Stops listening and ends every connection. */
  close(): void {
    this.detach();
    this.server?.close();
    this.server = null;
  }

  private accept(socket: Socket): void {
    const conn: Connection = { socket, inFlight: new Map(), byCallerId: new Map(), isGreeted: false };
    this.connections.add(conn);
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.drop(conn));
    socket.on(
      'data',
      lineSplitter(
        (line) => this.fromServer(conn, line.toString('latin1')),
        () => socket.destroy(),
      ),
    );
    if (this.greeting !== null) this.greet(conn);
  }

  private greet(conn: Connection): void {
    if (conn.isGreeted || this.greeting === null) return;
    conn.isGreeted = true;
    conn.socket.write(this.greeting + '\n', 'latin1');
  }

  private fromServer(conn: Connection, line: string): void {
    const m = CLIENT_FRAME.exec(line);
    // Nothing before the greeting, and nothing that is not a frame.
    if (!m || !conn.isGreeted || !this.link) {
      conn.socket.destroy();
      return;
    }
    const callerId = Number(m[1]);
    if (m[2] === 'abort') {
      const id = conn.byCallerId.get(callerId);
      if (id !== undefined) this.link.write(`{"id":${id},${line.slice(m[0].length - '"abort":'.length)}\n`);
      return;
    }
    if (conn.byCallerId.has(callerId)) return; // a repeated id: the first one's answer stands
    const id = this.nextId++;
    conn.inFlight.set(id, callerId);
    conn.byCallerId.set(callerId, id);
    this.routes.set(id, conn);
    this.link.write(`{"id":${id},${line.slice(m[0].length - '"request":'.length)}\n`);
  }

  /** A server went away: its requests are aborted, their answers dropped. */
  private drop(conn: Connection): void {
    if (!this.connections.delete(conn)) return;
    for (const id of conn.inFlight.keys()) {
      this.routes.set(id, null);
      this.link?.write(`{"id":${id},"abort":"disconnected"}\n`);
    }
  }
}
