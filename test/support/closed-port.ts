// A loopback port where nothing listens, and where nothing else can start to while the test needs
// it. A port the kernel handed out and that was closed again is free for any process that binds a
// port the kernel picks: a server of the other vitest worker could be listening there by the time
// a test connects, expecting to be refused. This port is bound (never listened on) by a small
// python3 child, so a connection to it is refused (RST) and no other socket can bind it.
import { spawn } from 'node:child_process';

export interface ClosedPort {
  port: number;
  /** Frees the port (the holder exits). */
  release(): void;
}

// Binds without SO_REUSEADDR, prints the port, holds it until its stdin ends (this test process's end at the latest).
const HOLDER =
  'import socket, sys\ns = socket.socket()\ns.bind(("127.0.0.1", 0))\nprint(s.getsockname()[1], flush=True)\nsys.stdin.read()\n';

/** A port on 127.0.0.1 where connections are refused until `release` (needs python3). */
export async function holdClosedPort(): Promise<ClosedPort> {
  const child = spawn('python3', ['-c', HOLDER], { stdio: ['pipe', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /^(\d+)\n/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`the port holder (python3) exited with ${code}`)));
  });
  return { port, release: () => child.stdin.end() };
}
