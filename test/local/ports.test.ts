// Ports of local sandboxes exposed to the host (expose_port's provider side), against real
// bubblewrap sandboxes: a server inside is reachable at the returned URL on this machine's
// loopback, the URL is stable (across provider instances too) and ends with the sandbox, while
// the sandbox itself still reaches none of the host's loopback services.
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { NETNS_HELPER_ARG } from '../../host/providers/local/network/netns-helper.js';
import type { Provider } from '../../host/providers/provider.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

/** The body of GET `url`, or the error code when the connection fails. */
async function get(url: string): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    return await res.text();
  } catch (e) {
    return `failed: ${String((e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name)}`;
  }
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

/** What these tests need (a failure when missing, never a skip). */
const requirements = (): void => {
  requireSandboxes();
  requireCommands(['curl', 'python3']);
};

describe('local sandbox exposed ports', () => {
  beforeAll(requirements);
  const stateDir = tempStateDir();
  let provider: Provider;
  let id: string;
  const hostService = createServer((_req, res) => res.end('host service\n'));
  let hostPort = 0;

  const sh = async (command: string) => {
    const r = await provider.exec(id, command, { timeoutS: 60 });
    return r.stdout.toString();
  };

  beforeAll(async () => {
    hostPort = await listen(hostService);
    provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    id = (await provider.create({ timeoutS: 300 })).sandbox_id;
    await sh('mkdir -p ~/site && echo "hello from the sandbox" > ~/site/index.html');
    await sh('cd ~/site && nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &');
  });

  afterAll(async () => {
    if (id) await provider.kill(id).catch(() => {});
    await provider.close();
    hostService.close();
    await destroyStateDir(stateDir);
  });

  it("serves the sandbox's port at a URL on the host's loopback, the same URL every time", async () => {
    const { url } = await provider.exposePort(id, 8000);
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    await waitFor(async () => (await get(url)) === 'hello from the sandbox\n', 'the exposed port to answer');
    expect(await provider.exposePort(id, 8000)).toEqual({ url });
    // Another provider instance (a restarted server) asks the keeper and gets the same URL.
    const other = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    try {
      expect(await other.exposePort(id, 8000)).toEqual({ url });
    } finally {
      await other.close();
    }
    const ports = JSON.parse(readFileSync(join(stateDir, 'local', id, 'ports.json'), 'utf8'));
    expect(ports).toEqual([{ port: 8000, host_port: Number(new URL(url).port) }]);
  });

  it("leaves the host's loopback services, the exposed URL included, out of the sandbox's reach", async () => {
    const { url } = await provider.exposePort(id, 8000);
    const r = await sh(
      `for p in ${hostPort} ${new URL(url).port}; do curl -sS --max-time 10 http://127.0.0.1:$p/ >/dev/null 2>&1; echo "exit=$?"; done`,
    );
    expect(r).toBe('exit=7\nexit=7\n');
  });

  it('answers nothing for a port where nothing listens yet, and works once something does', async () => {
    const { url } = await provider.exposePort(id, 8001);
    expect(await get(url)).toMatch(/^failed/);
    await sh('cd ~/site && nohup python3 -m http.server 8001 --bind 127.0.0.1 >/dev/null 2>&1 &');
    await waitFor(async () => (await get(url)) === 'hello from the sandbox\n', 'the exposed port to answer');
  });

  it("keeps forwarding after the keeper's netns helper is killed (it is started again)", async () => {
    const { url } = await provider.exposePort(id, 8000);
    expect(await get(url)).toBe('hello from the sandbox\n');
    const rec = readKeeperRecord(join(stateDir, 'local', id))!;
    const netNs = readlinkSync(`/proc/${rec.pid1.pid}/ns/net`);
    const pidNs = readlinkSync(`/proc/${rec.pid1.pid}/ns/pid`);
    const helpers = readdirSync('/proc')
      .filter((n) => /^\d+$/.test(n))
      .filter((n) => {
        try {
          // In the sandbox's network namespace but not its pid namespace, and the helper (not the
          // host-side half of the nsenter that entered the resident agent).
          return (
            readlinkSync(`/proc/${n}/ns/net`) === netNs &&
            readlinkSync(`/proc/${n}/ns/pid`) !== pidNs &&
            readFileSync(`/proc/${n}/cmdline`, 'utf8').split('\0').includes(NETNS_HELPER_ARG)
          );
        } catch {
          return false;
        }
      });
    expect(helpers.length).toBe(1);
    process.kill(Number(helpers[0]), 'SIGKILL');
    await waitFor(() => !existsSync(`/proc/${helpers[0]}`), 'the old helper to exit');
    expect(await get(url)).toBe('hello from the sandbox\n');
  });

  it('refuses ports outside 1-65535 and more than 32 ports per sandbox', async () => {
    for (const port of [0, 65536, 1.5]) {
      await expect(provider.exposePort(id, port)).rejects.toMatchObject({
        category: 'invalid_argument',
        message: expect.stringContaining('port'),
      });
    }
    // With 8000 and 8001 (exposed again: the same forwards), 30 more reach the maximum.
    for (const port of [8000, 8001]) await provider.exposePort(id, port);
    for (let port = 9000; port < 9030; port++) await provider.exposePort(id, port);
    await expect(provider.exposePort(id, 9030)).rejects.toMatchObject({ category: 'insufficient_resources', code: 'too_many_ports' });
    // An exposed port still answers with the same URL.
    expect((await provider.exposePort(id, 9000)).url).toMatch(/^http:\/\/127\.0\.0\.1:/);
  });

  it('stops answering once the sandbox is killed', async () => {
    const { url } = await provider.exposePort(id, 8000);
    expect(await get(url)).toBe('hello from the sandbox\n');
    await provider.kill(id);
    id = '';
    expect(await get(url)).toBe('failed: ECONNREFUSED');
    await expect(provider.exposePort('abcdefghijkl', 8000)).rejects.toMatchObject({ category: 'not_found' });
  });
});

describe("local sandbox exposed ports with the host's network", () => {
  beforeAll(requirements);
  const stateDir = tempStateDir();

  it("is the sandbox's own port on the host's loopback", async () => {
    const provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, network: 'host' });
    const { sandbox_id: id } = await provider.create({ timeoutS: 60 });
    try {
      expect(await provider.exposePort(id, 8765)).toEqual({ url: 'http://127.0.0.1:8765/' });
      expect(existsSync(join(stateDir, 'local', id, 'control.sock'))).toBe(false);
    } finally {
      await provider.kill(id);
      await provider.close();
      await destroyStateDir(stateDir);
    }
  });
});
