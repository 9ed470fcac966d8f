// Ports of a sandbox exposed to the host, kept by its keeper: for each sandbox port a listener on
// the host's loopback at a free port, whose connections are forwarded to that port on the
// sandbox's own loopback (through netns-sockets.ts). Exposing a port twice returns the same
// listener; they all close when the sandbox ends. The current map is written to ports.json for
// anyone inspecting the sandbox (the keeper itself answers from memory).
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { PORTS_FILE, writePrivateFile } from '../sandbox/state-dir.js';
import type { NetnsSockets } from './netns-sockets.js';
import { splice } from './splice.js';

/** Most ports one sandbox may expose. */
export const MAX_EXPOSED_PORTS = 32;

/** One exposed port: the sandbox's port and the host loopback port that reaches it. */
export interface ExposedPortRecord {
  port: number;
  host_port: number;
}

/** Why a port could not be exposed. */
export class ExposeError extends Error {
  constructor(readonly code: 'too_many_ports' | 'listen_failed') {
    super(code);
  }
}

/** The exposed ports of one sandbox. */
export class PortForwards {
  private readonly byPort = new Map<number, Promise<{ server: Server; hostPort: number }>>();
  private readonly open = new Set<Socket>();
  private isClosed = false;

  constructor(
    private readonly sockets: NetnsSockets,
    private readonly dir: string,
  ) {}

  /** The host loopback port forwarding to the sandbox's `port`, made on the first call. */
  async expose(port: number): Promise<number> {
    let entry = this.byPort.get(port);
    if (!entry) {
      if (this.byPort.size >= MAX_EXPOSED_PORTS) throw new ExposeError('too_many_ports');
      entry = this.listen(port);
      this.byPort.set(port, entry);
      entry.catch(() => this.byPort.delete(port));
    }
    return (await entry).hostPort;
  }

  /** Closes every listener and forwarded connection. */
  close(): void {
    this.isClosed = true;
    for (const entry of this.byPort.values()) void entry.then(({ server }) => server.close()).catch(() => undefined);
    for (const s of this.open) s.destroy();
    this.open.clear();
  }

  private track(s: Socket): void {
    this.open.add(s);
    s.once('close', () => this.open.delete(s));
  }

  private listen(port: number): Promise<{ server: Server; hostPort: number }> {
    const server = createServer((client) => this.forward(client, port));
    return new Promise((resolve, reject) => {
      server.once('error', () => reject(new ExposeError('listen_failed')));
      server.listen({ port: 0, host: '127.0.0.1', exclusive: true }, () => {
        if (this.isClosed) {
          server.close();
          return reject(new ExposeError('listen_failed'));
        }
        const hostPort = (server.address() as { port: number }).port;
        resolve({ server, hostPort });
        this.record().catch(() => undefined);
      });
    });
  }

  /** One host connection to the sandbox's port; closed at once when nothing listens there. */
  private forward(client: Socket, port: number): void {
    this.track(client);
    client.on('error', () => client.destroy());
    this.sockets.connect(port).then(
      (upstream) => {
        this.track(upstream);
        if (client.destroyed || this.isClosed) return void upstream.destroy();
        splice(client, upstream);
        upstream.resume();
      },
      () => client.destroy(),
    );
  }

  private async record(): Promise<void> {
    const records: ExposedPortRecord[] = [];
    for (const [port, entry] of this.byPort) {
      const settled = await entry.catch(() => null);
      if (settled) records.push({ port, host_port: settled.hostPort });
    }
    try {
      writePrivateFile(join(this.dir, PORTS_FILE), JSON.stringify(records.sort((a, b) => a.port - b.port)) + '\n');
    } catch {
      // The state is being removed: the sandbox is ending.
    }
  }
}
