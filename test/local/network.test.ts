// Network isolation of local sandboxes: by default a sandbox has a network namespace of its own
// (only its own loopback), so the host's loopback services and abstract Unix sockets are out of
// reach; `network: 'host'` shares the host's, and every provider instance enters each sandbox
// with the mode it was created with.
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { readSpec } from '../../host/providers/local/sandbox/state-dir.js';
import type { Provider } from '../../host/providers/provider.js';
import { AGENT_RUNTIME_DIR, AGENT_RUNTIME_NODE } from '../../shared/agent-runtime.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

// Prints `connected` or the error code of one connection attempt: TCP to 127.0.0.1:$TARGET, or
// the abstract Unix socket named $TARGET (the NUL prefix is added here: envs may not carry NULs).
// Run by $NODE, the agent runtime's node: the Node.js this test listens with, bound into every
// sandbox (its host path may be hidden, e.g. a CI line's node under /tmp). The sandbox's own `node`
// may be another line (PATH puts /usr/bin first), and Node 20 pads an abstract name to 108 bytes
// where 22 and later use its exact length, so across lines the probe would miss even a reachable socket.
const PROBE = `"$NODE" -e '
const net = require("net");
const t = process.env.TARGET;
const s = process.env.KIND === "tcp" ? net.connect(Number(t), "127.0.0.1") : net.connect("\\0" + t);
s.on("connect", () => { console.log("connected"); s.destroy(); });
s.on("error", (e) => console.log(e.code));
'`;

const RUNTIME_NODE = join(AGENT_RUNTIME_DIR, AGENT_RUNTIME_NODE);

// Listens on the sandbox's own loopback and connects to itself.
const SELF_LOOPBACK = `node -e '
const net = require("net");
const srv = net.createServer((c) => c.end("pong")).listen(0, "127.0.0.1", () => {
  net.connect(srv.address().port, "127.0.0.1").on("data", (d) => { console.log(String(d)); process.exit(0); })
    .on("error", (e) => { console.log(e.code); process.exit(1); });
});
'`;

function listen(server: Server, target: number | string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if (typeof target === 'number') server.listen(target, '127.0.0.1', () => resolve());
    else server.listen(target, () => resolve());
  });
}

describe('local sandbox network', () => {
  const stateDir = tempStateDir();
  let isolated: Provider;
  let shared: Provider;
  let isolatedId: string;
  let sharedId: string;
  const tcp = createServer((c) => c.destroy());
  const abstract = createServer((c) => c.destroy());
  const abstractName = `sandbox-mcp-probe-${randomBytes(6).toString('hex')}`;
  let tcpPort = 0;
  let tcpConnections = 0;
  let abstractConnections = 0;
  tcp.on('connection', () => tcpConnections++);
  abstract.on('connection', () => abstractConnections++);

  const probe = async (provider: Provider, id: string, kind: 'tcp' | 'abstract') => {
    const target = kind === 'tcp' ? String(tcpPort) : abstractName;
    const r = await provider.exec(id, PROBE, { timeoutS: 30, envs: { KIND: kind, TARGET: target, NODE: RUNTIME_NODE } });
    expect(r.exitCode).toBe(0);
    return r.stdout.toString().trim();
  };

  beforeAll(async () => {
    requireSandboxes();
    await listen(tcp, 0);
    tcpPort = (tcp.address() as { port: number }).port;
    await listen(abstract, `\0${abstractName}`);
    isolated = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    shared = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, network: 'host' });
    [isolatedId, sharedId] = await Promise.all([
      isolated.create({ timeoutS: 120 }).then((m) => m.sandbox_id),
      shared.create({ timeoutS: 120 }).then((m) => m.sandbox_id),
    ]);
  });

  afterAll(async () => {
    for (const id of [isolatedId, sharedId]) if (id) await isolated.kill(id).catch(() => {});
    await Promise.all([isolated?.close(), shared?.close()]);
    tcp.close();
    abstract.close();
    await destroyStateDir(stateDir);
  });

  it('by default cannot reach a TCP service on the host loopback', async () => {
    // The host side works: the same probe from here connects.
    expect(await probe(shared, sharedId, 'tcp')).toBe('connected');
    const before = tcpConnections;
    expect(await probe(isolated, isolatedId, 'tcp')).toBe('ECONNREFUSED');
    expect(tcpConnections).toBe(before);
  });

  it("by default cannot reach the host's abstract Unix sockets", async () => {
    const before = abstractConnections;
    expect(await probe(isolated, isolatedId, 'abstract')).toBe('ECONNREFUSED');
    expect(abstractConnections).toBe(before);
  });

  it('by default has its own loopback and no other interface', async () => {
    const r = await isolated.exec(isolatedId, `${SELF_LOOPBACK}; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "`, { timeoutS: 30 });
    expect(r.stdout.toString()).toBe('pong\nlo\n');
  });

  it("with network 'host' reaches the host loopback and abstract sockets", async () => {
    const before = [tcpConnections, abstractConnections];
    expect(await probe(shared, sharedId, 'tcp')).toBe('connected');
    expect(await probe(shared, sharedId, 'abstract')).toBe('connected');
    await waitFor(() => tcpConnections > before[0]! && abstractConnections > before[1]!, 'both connections to arrive');
  });

  it('records the mode per sandbox: another instance enters each one with the mode it was made with', async () => {
    const dirOf = (id: string) => join(stateDir, 'local', id);
    expect(readSpec(dirOf(isolatedId))?.network).toBe('isolated');
    expect(readSpec(dirOf(sharedId))?.network).toBe('host');
    // Each instance was configured the other way round.
    expect(await probe(isolated, sharedId, 'tcp')).toBe('connected');
    expect(await probe(shared, isolatedId, 'tcp')).toBe('ECONNREFUSED');
    // File operations enter the same way.
    await shared.writeFile(isolatedId, 'cross.txt', Buffer.from('one'));
    expect((await isolated.readFile(sharedId, '/etc/passwd')).data.toString()).toContain('user:x:');
    expect((await shared.readFile(isolatedId, 'cross.txt')).data.toString()).toBe('one');
  });
});
