// The keeper's relay between servers and its sandbox's resident agent. Servers connect to the
// Unix socket `agent.sock` in the sandbox's state directory (0700: only this user's servers);
// the resident reads one stream of frames on its stdin and answers on its stdout
// (shared/resident.ts). The relay gives every request a number of its own on the way in and
// gives it back its caller's on the way out, so several servers share one resident; a server
// that goes away has its requests aborted (`disconnected`: the resident keeps what they started
// as tasks). Frames are only renumbered, never parsed beyond their `{"id":N,` prefix: the relay
// trusts the resident no more than before (servers validate every answer), and a line that is
// not shaped like a frame, or is too long, ends the resident's stream or the connection.
//
// The quiet period: once no request has been in flight and no frame has passed for `quietMs`, the
// relay suspends (no frame is written to the resident from then on) and tells its owner, who ends
// the resident's input (it exits). The relay decides, not the resident, because only it knows
// that nothing is on its way: a frame a server sends from then on is held, with the connection
// kept open (a channel that stays connected is served), and `onDemand` asks for a resident again;
// the held frames go to it once it greets, in order. A new connection is greeted by that resident.
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

/** What the relay tells its owner (keeper/resident.ts). */
export interface RelayOwner {
  /** Nothing passed for the quiet period: the relay is suspended; stop the resident. */
  onQuiet(): void;
  /** A server needs a resident (a frame held, or a connection waiting for a greeting) while none is attached. */
  onDemand(): void;
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
  /** The greeting connections already have: a resident started after a quiet period must give the same (but its pid). */
  private lastGreeting: string | null = null;
  /** Frames (renumbered) that came while no resident was attached, for the next one. */
  private held: string[] = [];
  private quietTimer: NodeJS.Timeout | undefined;

  /** `quietMs`: the quiet period (null: none, the resident stays up). */
  constructor(
    private readonly quietMs: number | null,
    private readonly owner: RelayOwner,
  ) {}

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

  /** A resident is up: frames go to `link` (the held ones first); connections get `greeting` (its first line) first. */
  attach(link: ResidentLink, greeting: string): void {
    if (this.lastGreeting !== null && withoutPid(this.lastGreeting) !== withoutPid(greeting)) {
      // Another build (the server was upgraded under this keeper): what the greeted connections
      // were told no longer holds. They end, and their held frames were never sent (servers retry).
      // Only held requests can be in flight here (the relay suspends with none).
      this.held = [];
      this.routes.clear();
      for (const conn of [...this.connections]) {
        if (!conn.isGreeted) continue;
        this.connections.delete(conn);
        conn.socket.destroy();
      }
    }
    this.link = link;
    this.greeting = greeting;
    this.lastGreeting = greeting;
    for (const line of this.held.splice(0)) link.write(line);
    for (const conn of this.connections) this.greet(conn);
    this.armQuiet();
  }

  /** The resident is gone (it failed): every connection ends (their requests' outcomes are unknown to them). */
  detach(): void {
    clearTimeout(this.quietTimer);
    this.quietTimer = undefined;
    this.link = null;
    this.greeting = null;
    this.lastGreeting = null;
    this.held = [];
    this.routes.clear();
    for (const conn of this.connections) conn.socket.destroy();
    this.connections.clear();
  }

  /** True when a server waits for a resident: a frame held, or a connection not yet greeted. */
  get hasDemand(): boolean {
    return this.held.length > 0 || [...this.connections].some((c) => !c.isGreeted);
  }

  /** One line the resident wrote (not its greeting); false when it is not shaped like a frame. */
  fromResident(line: string): boolean {
    const m = FRAME_PREFIX.exec(line);
    if (!m) return false;
    const id = Number(m[1]);
    const conn = this.routes.get(id);
    this.armQuiet();
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
    else if (!this.link) this.owner.onDemand();
  }

  private greet(conn: Connection): void {
    if (conn.isGreeted || this.greeting === null) return;
    conn.isGreeted = true;
    conn.socket.write(this.greeting + '\n', 'latin1');
  }

  private fromServer(conn: Connection, line: string): void {
    const m = CLIENT_FRAME.exec(line);
    // Nothing before the greeting, and nothing that is not a frame.
    if (!m || !conn.isGreeted) {
      conn.socket.destroy();
      return;
    }
    this.armQuiet();
    const callerId = Number(m[1]);
    if (m[2] === 'abort') {
      const id = conn.byCallerId.get(callerId);
      if (id !== undefined) this.toResident(`{"id":${id},${line.slice(m[0].length - '"abort":'.length)}\n`);
      return;
    }
    if (conn.byCallerId.has(callerId)) return; // a repeated id: the first one's answer stands
    const id = this.nextId++;
    conn.inFlight.set(id, callerId);
    conn.byCallerId.set(callerId, id);
    this.routes.set(id, conn);
    this.toResident(`{"id":${id},${line.slice(m[0].length - '"request":'.length)}\n`);
  }

  /** Writes a frame to the resident, or holds it for the next one (and asks for one). */
  private toResident(frame: string): void {
    if (this.link) {
      this.link.write(frame);
      return;
    }
    this.held.push(frame);
    if (this.held.length === 1) this.owner.onDemand();
  }

  /** (Re)starts the quiet period: it ends once nothing is in flight for quietMs. */
  private armQuiet(): void {
    if (this.quietMs === null || !this.link) return;
    // One timer, put off by every frame (refresh re-arms it, fired or not: no new timer a frame).
    if (this.quietTimer) this.quietTimer.refresh();
    else this.quietTimer = setTimeout(() => this.onQuietEnd(), this.quietMs);
  }

  private onQuietEnd(): void {
    if (!this.link) return;
    // A request in flight (a get that waits, a command that runs) keeps the resident; its answer re-arms.
    if (this.routes.size > 0) return;
    this.link = null;
    this.greeting = null;
    this.owner.onQuiet();
  }

  /** A server went away: its requests are aborted, their answers dropped. */
  private drop(conn: Connection): void {
    if (!this.connections.delete(conn)) return;
    for (const id of conn.inFlight.keys()) {
      this.routes.set(id, null);
      this.toResident(`{"id":${id},"abort":"disconnected"}\n`);
    }
  }
}

/** A greeting without its `"pid":N` (each resident's own). */
function withoutPid(greeting: string): string {
  return greeting.replace(/"pid":\d+,?/, '');
}
