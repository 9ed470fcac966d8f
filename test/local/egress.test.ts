// Egress of local sandboxes through their allow-list proxy, against real bubblewrap sandboxes and
// servers on this machine's loopback (the only network here): what an allow-list lets through,
// what it refuses and how, that nothing else gets out, that HTTPS is tunnelled untouched, that
// pipelined requests cannot open more upstream connections than the keeper's cap, that the
// sandbox cannot take the proxy down, and that the proxy ends with the sandbox.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, readlinkSync, readdirSync } from 'node:fs';
import { createServer as createHttpServer, type Server as HttpServer, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createLocalProvider, type EgressFailureReport } from '../../host/providers/local/local-provider.js';
import { NETNS_HELPER_ARG } from '../../host/providers/local/network/netns-helper.js';
import { readKeeperRecord, readSpec } from '../../host/providers/local/sandbox/state-dir.js';
import { isAlive } from '../../host/providers/local/system/proc.js';
import type { Provider } from '../../host/providers/provider.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { holdNamespace } from '../support/processes.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

/** A self-signed certificate for 127.0.0.1, made with openssl in `dir`. */
function selfSignedCert(dir: string): { key: Buffer; cert: Buffer } {
  // prettier-ignore
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
  ], { stdio: 'ignore' });
  return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
}

function listen(server: HttpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

/** Processes outside the sandbox's pid namespace that sit in its network namespace (the keeper's netns helper). */
function helpersIn(netNs: string, pidNs: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/ns/net`) === netNs && readlinkSync(`/proc/${name}/ns/pid`) !== pidNs) pids.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/**
 * The network and pid namespaces of a sandbox's pid 1, held until the test ends: a look for what
 * is left in them after the sandbox is gone must not find a sandbox another test file has made
 * since, in a namespace given the same number (test/support/processes.ts, holdNamespace).
 */
function heldNamespacesOf(pid1: number): [net: string, pid: string] {
  const held = [holdNamespace(pid1, 'net'), holdNamespace(pid1, 'pid')];
  onTestFinished(() => held.forEach((h) => h.release()));
  return [held[0]!.name, held[1]!.name];
}

/** True for the keeper's netns helper (`node keeper.cjs --netns-helper …`). */
function isNetnsHelper(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(NETNS_HELPER_ARG);
  } catch {
    return false;
  }
}

// curl runs inside the sandboxes (from the host's /usr/bin); openssl makes the test certificate.
/** What these tests need (a failure when missing, never a skip). */
const requirements = (): void => {
  requireSandboxes();
  requireCommands(['curl', 'openssl']);
};

describe('local sandbox egress allow-list', () => {
  beforeAll(requirements);
  const stateDir = tempStateDir();
  const denials: EgressFailureReport[] = [];
  let provider: Provider;
  let id: string;
  const hits = { one: 0, two: 0, tls: 0 };
  const one = createHttpServer((_req, res) => {
    hits.one++;
    res.end('page one\n');
  });
  const two = createHttpServer((_req, res) => {
    hits.two++;
    res.end('page two\n');
  });
  // Holds every request until a test releases them (the connection cap's test).
  const held: ServerResponse[] = [];
  let isReleased = false;
  const slow = createHttpServer((_req, res) => (isReleased ? res.end('ok') : held.push(res)));
  const blob = randomBytes(256 * 1024);
  let tls: HttpServer;
  let p1 = 0;
  let p2 = 0;
  let pTls = 0;
  let pSlow = 0;
  let cert: Buffer;

  const sh = async (command: string, sandbox = id) => {
    const r = await provider.exec(sandbox, command, { timeoutS: 60 });
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };

  beforeAll(async () => {
    const pem = selfSignedCert(stateDir);
    cert = pem.cert;
    tls = createHttpsServer(pem, (_req, res) => {
      hits.tls++;
      res.end(blob);
    });
    [p1, p2, pTls, pSlow] = await Promise.all([listen(one), listen(two), listen(tls), listen(slow)]);
    provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, onEgressFailure: (d) => denials.push(d) });
    const meta = await provider.create({
      timeoutS: 300,
      network: { allowOut: [`127.0.0.1:${p1}`, `127.0.0.1:${pTls}`, `localhost:${p2}`, `127.0.0.1:${pSlow}`] },
    });
    id = meta.sandbox_id;
  });

  afterAll(async () => {
    if (id) await provider.kill(id).catch(() => {});
    await provider.close();
    one.close();
    two.close();
    tls?.close();
    isReleased = true;
    for (const r of held.splice(0)) r.end('ok');
    slow.close();
    await destroyStateDir(stateDir);
  });

  it('reaches an allowed destination through the proxy its commands are given', async () => {
    const r = await sh(`printf '%s\\n' "$HTTP_PROXY" "$https_proxy" "$NO_PROXY"; curl -sS http://127.0.0.1:${p1}/`);
    expect(r.err).toBe('');
    // 127.0.0.1 and localhost are listed: they mean the host's, so they are proxied rather than the sandbox's own.
    expect(r.out).toBe('http://127.0.0.1:3128\nhttp://127.0.0.1:3128\n::1\npage one\n');
  });

  it('refuses a destination that is not listed with a 403 naming the host and the setting', async () => {
    const before = hits.two;
    const r = await sh(`curl -sS -w '\\n%{http_code}' http://127.0.0.1:${p2}/`);
    expect(r.out).toMatch(new RegExp(`^sandbox-mcp: 127\\.0\\.0\\.1:${p2} is not on this sandbox's egress allow-list\\.`));
    expect(r.out).toContain('network.allow_out');
    expect(r.out).toMatch(/\n403$/);
    expect(hits.two).toBe(before);
  });

  it('refuses a name that resolves to a loopback address unless the address itself is listed', async () => {
    const before = hits.two;
    // `localhost:<p2>` is listed, but only by name: it resolves to 127.0.0.1, which no entry names with that port.
    const byName = await sh(`curl -sS -w '\\n%{http_code}' http://localhost:${p2}/`);
    expect(byName.out).toMatch(
      /^sandbox-mcp: localhost resolves to (127\.0\.0\.1|::1), a loopback address, which the egress proxy refuses/,
    );
    expect(byName.out).toMatch(/\n403$/);
    expect(hits.two).toBe(before);
    // Written literally, the same kind of address is reachable (the first test's 127.0.0.1:<p1>).
    expect((await sh(`curl -sS http://127.0.0.1:${p1}/`)).out).toBe('page one\n');
  });

  it('reports each refusal to the listener by destination and reason only', async () => {
    // Refusals of its own (an address, and a name), whatever ran before.
    await sh(`curl -sS http://127.0.0.1:${p2}/x?token=1; curl -sS http://localhost:${p2}/`);
    await waitFor(
      () => denials.some((d) => d.host === 'localhost') && denials.some((d) => d.host === '127.0.0.1'),
      'both denials to be reported',
    );
    for (const d of denials) {
      expect(d.sandboxId).toBe(id);
      expect(d.port).toBe(p2);
      if (d.host === 'localhost') {
        expect(Object.keys(d).sort()).toEqual(['address', 'atMs', 'host', 'port', 'reason', 'sandboxId']);
        expect(d).toMatchObject({ reason: 'private_address', address: expect.stringMatching(/^(127\.0\.0\.1|::1)$/) });
      } else {
        expect(Object.keys(d).sort()).toEqual(['atMs', 'host', 'port', 'reason', 'sandboxId']);
        expect(d).toMatchObject({ host: '127.0.0.1', reason: 'not_listed' });
      }
    }
  });

  it('opens no more upstream connections than its cap for pipelined requests, answering the rest 503', async () => {
    // The keeper's cap (256) against 4 connections of 80 pipelined requests each (320), to a server
    // that holds every request until the test releases them. Bounded: a proxy without the cap opens 320.
    const CAP = 256;
    let open = 0;
    let peak = 0;
    slow.on('connection', (c) => {
      peak = Math.max(peak, ++open);
      c.once('close', () => open--);
    });
    const script = [
      'import socket',
      `req = b"GET http://127.0.0.1:${pSlow}/ HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"`,
      'socks = [socket.create_connection(("127.0.0.1", 3128)) for _ in range(4)]',
      'for s in socks: s.sendall(req * 80)',
      // Each connection's 80 answers, in order (the held ones first): count the status lines.
      'codes = []',
      'for s in socks:',
      '    data = b""',
      '    while data.count(b"HTTP/1.1 ") < 80:',
      '        chunk = s.recv(65536)',
      '        if not chunk: break',
      '        data += chunk',
      '    codes += [data[i + 9:i + 12].decode() for i in range(len(data)) if data.startswith(b"HTTP/1.1 ", i)]',
      'print(" ".join(codes))',
    ].join('\n');
    const run = provider.exec(id, `python3 -c '${script}'`, { timeoutS: 60 });
    try {
      // Released once the proxy holds its cap (or more, without one): then every request is answered.
      await waitFor(() => held.length >= CAP, 'the proxy to forward up to its cap');
      // The rest of the pipelined requests reached the proxy with the first ones: by the end of a
      // round trip into the sandbox it has refused them, or opened their connections (which the
      // server accepts meanwhile).
      expect((await sh('true')).code).toBe(0);
    } finally {
      isReleased = true;
      for (const r of held.splice(0)) r.end('ok');
    }
    const peakBeforeRelease = peak;
    const codes = (await run).stdout.toString().trim().split(' ');
    expect(peakBeforeRelease).toBe(CAP);
    expect(peak).toBeLessThanOrEqual(CAP);
    expect(codes.length).toBe(320);
    expect(codes.filter((c) => c === '200').length).toBeGreaterThanOrEqual(CAP);
    expect(codes.filter((c) => c !== '200' && c !== '503')).toEqual([]);
  });

  it('gets nowhere without the proxy: no route, no name resolution', async () => {
    const before = { ...hits };
    for (const port of [p1, p2]) {
      const r = await sh(`curl -sS --noproxy '*' --max-time 10 http://127.0.0.1:${port}/; echo "exit=$?"`);
      expect(r.out).toMatch(/exit=7\n$/); // curl: could not connect
    }
    const dns = await sh(`curl -sS --noproxy '*' --max-time 10 http://example.com/; echo "exit=$?"`);
    expect(dns.out).toMatch(/exit=6\n$/); // curl: could not resolve host
    expect(hits).toEqual(before);
  });

  it('tunnels HTTPS through CONNECT byte for byte, with the server certificate untouched', async () => {
    await provider.writeFile(id, 'server-cert.pem', cert);
    const r = await sh(`curl -sS --cacert ~/server-cert.pem https://127.0.0.1:${pTls}/ | sha256sum | cut -d' ' -f1`);
    expect(r.err).toBe('');
    expect(r.out.trim()).toBe(createHash('sha256').update(blob).digest('hex'));
  });

  it('cannot be taken down from inside: the proxy is not a process of the sandbox', async () => {
    // Everything the sandbox user can signal (its resident agent too, which ran this: its answer
    // may be lost), then its whole view of processes.
    await sh('kill -9 -1 2>/dev/null; true').catch((e: { code?: string }) => expect(e.code).toBe('agent_lost'));
    const r = await sh("sleep 0.2; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c '[n]etns-helper' || true");
    expect(r.out.trim()).toBe('0');
    expect((await sh(`curl -sS http://127.0.0.1:${p1}/`)).out).toBe('page one\n');
    // Another listener cannot take the proxy's address.
    const bind = await sh(`python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 3128))' 2>&1; echo "exit=$?"`);
    expect(bind.out).toMatch(/Address already in use[\s\S]*exit=1/);
  });

  it('records the allow-list in the spec and holds nothing once the sandbox is killed', async () => {
    const dir = join(stateDir, 'local', id);
    expect(readSpec(dir)?.allowOut).toEqual([`127.0.0.1:${p1}`, `127.0.0.1:${pTls}`, `localhost:${p2}`, `127.0.0.1:${pSlow}`]);
    const rec = readKeeperRecord(dir)!;
    const [netNs, pidNs] = heldNamespacesOf(rec.pid1.pid);
    await provider.kill(id);
    expect(isAlive(rec.keeper)).toBe(false);
    expect(isAlive(rec.pid1)).toBe(false);
    expect(helpersIn(netNs, pidNs)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
    id = '';
  });
});

describe('local sandbox network argument', () => {
  beforeAll(requirements);
  const stateDir = tempStateDir();
  let provider: Provider;
  const created: string[] = [];

  beforeAll(() => {
    // A provider whose default shares the host's network: an explicit policy still isolates.
    provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, network: 'host' });
  });

  afterAll(async () => {
    for (const sb of created) await provider.kill(sb).catch(() => {});
    await provider.close();
    await destroyStateDir(stateDir);
  });

  it('"none" gives an isolated sandbox without a proxy or proxy variables, whatever the default', async () => {
    const host = createHttpServer((_req, res) => res.end('host\n'));
    const port = await listen(host);
    try {
      const { sandbox_id: sb } = await provider.create({ timeoutS: 60, network: { allowOut: [] } });
      created.push(sb);
      const r = await provider.exec(sb, `echo "\${HTTP_PROXY-unset}"; curl -sS --max-time 10 http://127.0.0.1:${port}/; echo "exit=$?"`, {
        timeoutS: 30,
      });
      expect(r.stdout.toString()).toBe('unset\nexit=7\n');
      expect(readSpec(join(stateDir, 'local', sb))).toMatchObject({ network: 'isolated' });
      expect(readSpec(join(stateDir, 'local', sb))?.allowOut).toBeUndefined();
    } finally {
      host.close();
    }
  });

  it('leaves no helper behind when the keeper itself is killed with SIGKILL', async () => {
    const { sandbox_id: sb } = await provider.create({ timeoutS: 60, network: { allowOut: ['pypi.org'] } });
    created.push(sb);
    const rec = readKeeperRecord(join(stateDir, 'local', sb))!;
    const [netNs, pidNs] = heldNamespacesOf(rec.pid1.pid);
    // The helper that made the proxy's socket idles a while before it is stopped. (The resident
    // agent's nsenter, once the keeper has started it, is in the network namespace too, outside
    // the sandbox's pid namespace: it ends with the sandbox as the helper does.)
    expect(helpersIn(netNs, pidNs).filter(isNetnsHelper).length).toBe(1);
    process.kill(rec.keeper.pid, 'SIGKILL');
    await waitFor(() => !isAlive(rec.pid1) && helpersIn(netNs, pidNs).length === 0, 'the sandbox and its helpers to end');
  });

  it('does not start a sandbox whose proxy cannot start, and leaves nothing behind', async () => {
    // An nsenter that cannot enter anything: the keeper's netns helper never starts.
    const broken = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, tools: { nsenter: '/bin/false' } });
    try {
      const sandboxDirs = () =>
        (existsSync(join(stateDir, 'local')) ? readdirSync(join(stateDir, 'local')) : []).filter((n) => !n.startsWith('.'));
      const before = sandboxDirs();
      const e = await broken.create({ timeoutS: 60, network: { allowOut: ['pypi.org'] } }).catch((err: unknown) => err);
      expect(e).toMatchObject({ category: 'unavailable', code: 'network_failed' });
      expect(sandboxDirs().filter((n) => !before.includes(n))).toEqual([]);
      // Without an allow-list nothing needs the helper at create.
      const { sandbox_id: sb } = await broken.create({ timeoutS: 60 });
      created.push(sb);
    } finally {
      await broken.close();
    }
  });

  it('refuses an entry that is not one, naming the field, and creates nothing', async () => {
    const sandboxDirs = () => (existsSync(join(stateDir, 'local')) ? readdirSync(join(stateDir, 'local')) : []);
    const before = sandboxDirs().length;
    await expect(provider.create({ timeoutS: 60, network: { allowOut: ['not a host'] } })).rejects.toMatchObject({
      category: 'invalid_argument',
      message: expect.stringContaining('network.allow_out'),
    });
    expect(sandboxDirs().length).toBe(before);
  });
});
