// Network through the BUILT server and a real MCP client: create_sandbox's `network` argument
// against the server's permitted set, the egress proxy surviving a server restart while its
// sandbox lives, refusals and unreachable destinations in the server's log (destination and
// reason only) and in notes on every failed command or task they explain (masked like its
// output), the Host an allowed server sees, a note on the missing network when a failed command's
// output shows one, expose_port serving a task's web server to the host until kill_sandbox (and
// refusing the proxy's own port), and the effective network in `sandbox-mcp network`.
// Then the same egress and expose_port with the server running as an ordinary user (nobody),
// whose keeper reaches the sandbox's network namespace through the sandbox's user namespace.
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { readKeeperRecord, type KeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { isAlive as isProcAlive } from '../../host/providers/local/system/proc.js';
import { connectStdio, ok, serverEnv, toolError, type StdioServer } from '../support/built-server.js';
import { holdClosedPort, type ClosedPort } from '../support/closed-port.js';
import { HOST_JS } from '../support/paths.js';
import { isRootOrSkipping, requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { holdNamespace } from '../support/processes.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const run = promisify(execFile);

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

async function get(url: string): Promise<string> {
  try {
    return await (await fetch(url, { signal: AbortSignal.timeout(10_000) })).text();
  } catch (e) {
    return `failed: ${String((e as { cause?: { code?: string } }).cause?.code ?? (e as Error).name)}`;
  }
}

/** The server's log lines (JSON) with message `msg`. */
function logLines(s: StdioServer, msg: string): Record<string, unknown>[] {
  return s
    .stderr()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg);
}

/** Processes in the network namespace `netNs` (e.g. `net:[4026532301]`), zombies included. */
function inNetNs(netNs: string): string[] {
  return readdirSync('/proc').filter((n) => {
    try {
      return /^\d+$/.test(n) && readlinkSync(`/proc/${n}/ns/net`) === netNs;
    } catch {
      return false;
    }
  });
}

/**
 * The network namespace of a sandbox's pid 1, held until the test ends: once the sandbox is gone,
 * inNetNs must not find a sandbox another test file has made since in a namespace given the same
 * number (test/support/processes.ts, holdNamespace).
 */
function heldNetNamespaceOf(pid1: number): string {
  const held = holdNamespace(pid1, 'net');
  onTestFinished(() => held.release());
  return held.name;
}

const stateDir = tempStateDir();
const hits = { one: 0, two: 0 };
/** The Host header of each request server one received. */
const hostsSeenByOne: string[] = [];
const one = createServer((req, res) => {
  hits.one++;
  hostsSeenByOne.push(String(req.headers.host));
  res.end('page one\n');
});
const two = createServer((_req, res) => {
  hits.two++;
  res.end('page two\n');
});
let p1 = 0;
let p2 = 0;
/** A loopback port nobody listens on, held so for the whole file (allowed: a destination the proxy cannot reach). */
let pClosed = 0;
let closed: ClosedPort | undefined;
let env: Record<string, string>;
let s: StdioServer | undefined;

beforeAll(async () => {
  requireSandboxes();
  requireCommands(['python3']);
  [p1, p2, closed] = await Promise.all([listen(one), listen(two), holdClosedPort()]);
  pClosed = closed.port;
  env = {
    SANDBOX_MCP_STATE_DIR: stateDir,
    SANDBOX_MCP_NETWORK_ALLOW: `127.0.0.1:${p1},localhost:${p2},@packages,no-such-host.invalid,127.0.0.1:${pClosed}`,
  };
});
afterAll(async () => {
  await s?.close();
  await destroyStateDir(stateDir);
  one.close();
  two.close();
  closed?.release();
});

describe('network through the MCP server', () => {
  it('tells the model its network and lists expose_port with strict schemas', async () => {
    s = await connectStdio(env);
    expect(s.client.getInstructions()).toMatch(/Network: without `network`, a local sandbox has no network at all/);
    const { tools } = await s.client.listTools();
    const create = tools.find((t) => t.name === 'create_sandbox')!;
    expect(create.description).toContain(`127.0.0.1:${p1}, localhost:${p2}, pypi.org`);
    expect((create.inputSchema.properties as Record<string, unknown>).network).toBeDefined();
    const expose = tools.find((t) => t.name === 'expose_port')!;
    expect(expose.inputSchema).toMatchObject({ type: 'object', required: ['port'], additionalProperties: false });
    expect(expose.outputSchema).toMatchObject({ type: 'object', properties: { url: { type: 'string' } } });
    expect(expose.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: true });
  });

  it('refuses entries outside the permitted set or not entries at all, naming the field, and creates nothing', async () => {
    const before = (await ok(s!.client, 'list_sandboxes', {})).sandboxes.length;
    const outside = await toolError(s!.client, 'create_sandbox', { network: { allow_out: [`127.0.0.1:${p2}`] } });
    expect(outside).toMatchObject({ category: 'invalid_argument', code: 'network_not_permitted' });
    expect(outside.text).toContain('network.allow_out.0');
    expect(outside.text).not.toContain(`127.0.0.1:${p2}`);
    for (const [network, field] of [
      [{ allow_out: ['pypi.org', 'VALUE with spaces'] }, 'network.allow_out.1'],
      ['everything', 'network'],
      [{ allow_out: [], extra: true }, 'extra'],
    ] as const) {
      const e = await toolError(s!.client, 'create_sandbox', { network });
      expect(e.category).toBe('invalid_argument');
      expect(e.text).toContain(field);
      expect(e.text).not.toContain('VALUE');
    }
    const port = await toolError(s!.client, 'expose_port', { sandbox_id: 'local:abcdefghijkl', port: 0 });
    expect(port.category).toBe('invalid_argument');
    expect(port.text).toContain('port');
    expect((await ok(s!.client, 'list_sandboxes', {})).sandboxes.length).toBe(before);
  });

  it('keeps egress and exposed ports across a server restart, logs refusals by host, and ends both with kill_sandbox', async () => {
    const meta = await ok(s!.client, 'create_sandbox', { timeout: 600, network: { allow_out: [`127.0.0.1:${p1}`, `localhost:${p2}`] } });
    const id = meta.sandbox_id as string;
    expect(Object.keys(meta).sort()).toEqual(
      ['cpu_count', 'disk_size_mb', 'end_at', 'memory_mb', 'region', 'sandbox_id', 'started_at', 'status', 'template'].sort(),
    );
    // A web server as a task (which also keeps the sandbox when this session ends).
    await ok(s!.client, 'run_command', { command: 'mkdir -p ~/site && echo "served from the sandbox" > ~/site/index.html' });
    await ok(s!.client, 'start_task', { command: 'cd ~/site && exec python3 -m http.server 8000', timeout: 600 });
    const { url } = await ok(s!.client, 'expose_port', { port: 8000 });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    await waitFor(async () => (await get(url)) === 'served from the sandbox\n', 'the task to serve at the exposed URL');

    const fetchOne = `curl -sS http://127.0.0.1:${p1}/`;
    expect((await ok(s!.client, 'run_command', { command: fetchOne })).stdout).toBe('page one\n');
    const refused = await ok(s!.client, 'run_command', { command: `curl -sS -w ' %{http_code}' http://localhost:${p2}/secret/path` });
    expect(refused.stdout).toMatch(/resolves to (127\.0\.0\.1|::1), a loopback address, which the egress proxy refuses[\s\S]* 403$/);
    expect(hits.two).toBe(0);
    // Around the proxy there is no way out, not even to the allowed server, nor to the exposed port's listener.
    const direct = await ok(s!.client, 'run_command', {
      command: `for u in http://127.0.0.1:${p1}/ ${url}; do curl -sS --noproxy '*' --max-time 10 $u >/dev/null 2>&1; echo "exit=$?"; done`,
    });
    expect(direct.stdout).toBe('exit=7\nexit=7\n');
    await waitFor(() => logLines(s!, 'network denied').length > 0, 'the refusal in the log');
    for (const line of logLines(s!, 'network denied')) {
      expect(Object.keys(line).sort()).toEqual(['address', 'host', 'level', 'msg', 'port', 'reason', 'sandbox_id', 't']);
      expect(line).toMatchObject({ host: 'localhost', port: p2, reason: 'private_address', sandbox_id: id });
    }
    expect(s!.stderr()).not.toContain('/secret/path');

    // The server goes away; the sandbox (retained by its task), its proxy and its port stay.
    await s!.close();
    s = await connectStdio(env);
    expect((await ok(s.client, 'run_command', { sandbox_id: id, command: fetchOne })).stdout).toBe('page one\n');
    expect((await ok(s.client, 'expose_port', { sandbox_id: id, port: 8000 })).url).toBe(url);
    expect(await get(url)).toBe('served from the sandbox\n');

    // A person sees the effective network with the debug CLI (tool results keep the nine fields).
    const { stdout } = await run(process.execPath, [HOST_JS, 'network', id], { env: serverEnv(env) });
    expect(JSON.parse(stdout)).toEqual({
      sandbox_id: id,
      egress: 'allow_out',
      allow_out: [`127.0.0.1:${p1}`, `localhost:${p2}`],
      proxy: 'http://127.0.0.1:3128',
      exposed_ports: [{ port: 8000, url }],
    });

    // The proxy, its helper and the port end with the sandbox.
    const dir = join(stateDir, 'local', id.replace('local:', ''));
    const keeper = JSON.parse(readFileSync(join(dir, 'keeper.json'), 'utf8')) as KeeperRecord;
    const netNs = heldNetNamespaceOf(keeper.pid1.pid);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
    expect(await get(url)).toBe('failed: ECONNREFUSED');
    expect(inNetNs(netNs)).toEqual([]);
    // Gone or a zombie awaiting its reaper (it was detached from the first server): never running.
    expect(isProcAlive(keeper.keeper)).toBe(false);
  });

  // One sandbox for the notes below: allowed an address, a loopback name, a name that does not resolve and a closed port.
  let notesId = '';
  const inNotesSandbox = async (command: string, more: Record<string, unknown> = {}) =>
    ok(s!.client, 'run_command', { sandbox_id: notesId, command, ...more });

  it('tells a failed command or task which destinations the proxy refused and why (HTTPS shows only the 403), masked, every time, and says nothing on success', async () => {
    s ??= await connectStdio(env);
    notesId = (
      await ok(s.client, 'create_sandbox', {
        timeout: 600,
        network: { allow_out: [`127.0.0.1:${p1}`, `localhost:${p2}`, 'no-such-host.invalid', `127.0.0.1:${pClosed}`] },
      })
    ).sandbox_id as string;
    // CONNECT refused, by name and by address: curl reports only "CONNECT tunnel failed, response 403".
    const refusing = `curl -sS https://refused-one.example/; curl -sS https://127.0.0.1:${p2}/`;
    const failed = await inNotesSandbox(refusing);
    expect(failed.exit_code).toBe(56);
    expect(failed.stderr).toContain('CONNECT tunnel failed, response 403');
    expect(failed.stderr).toContain(
      `\n[sandbox-mcp] The sandbox's egress proxy refused refused-one.example:443, 127.0.0.1:${p2}: not on this sandbox's allow-list`,
    );
    // The same refusals again within the minute: the log heard them already, the agent still gets the note.
    const again = await inNotesSandbox(refusing);
    expect(again.stderr).toContain(`[sandbox-mcp] The sandbox's egress proxy refused refused-one.example:443, 127.0.0.1:${p2}: `);
    expect(hits.two).toBe(0);
    // An allowed name that resolves to a loopback address: the note says so, with the address and the entry that would allow it.
    const loopback = await inNotesSandbox(`curl -sS https://localhost:${p2}/`);
    expect(loopback.stderr).toMatch(
      new RegExp(
        `\\[sandbox-mcp\\] The sandbox's egress proxy refused localhost:${p2} \\(it resolved to (127\\.0\\.0\\.1|::1), a loopback address\\): ` +
          `[^\\n]* names (127\\.0\\.0\\.1|\\[::1\\]):${p2}, within what the server permits`,
      ),
    );
    // A command that succeeds gets no note, even when a request of it was refused.
    const fine = await inNotesSandbox(`curl -sS https://refused-two.example/ || curl -sS http://127.0.0.1:${p1}/`);
    expect(fine).toMatchObject({ exit_code: 0, stdout: 'page one\n' });
    expect(fine.stderr).not.toContain('[sandbox-mcp]');

    // The host name is the sandbox's choice: a secret put into it is masked in the note.
    const secret = 'notes0secret0value';
    const leak = (await s!.client.callTool({
      name: 'run_command',
      arguments: { sandbox_id: notesId, command: 'curl -sS "https://$API_TOKEN.example/"', envs: { API_TOKEN: secret } },
    })) as CallToolResult;
    expect((leak.structuredContent as { stderr: string }).stderr).toContain('egress proxy refused [MASKED].example:443: ');
    expect(JSON.stringify(leak)).not.toContain(secret);
  });

  it('tells a failed command or task which allowed destinations the proxy could not reach and what happened, and logs them', async () => {
    // A name that does not resolve (HTTPS: curl shows only the 502) and a port nobody listens on (plain HTTP: the proxy's text).
    const unreachable = await inNotesSandbox(`curl -sS https://no-such-host.invalid/; curl -sSf http://127.0.0.1:${pClosed}/`);
    expect(unreachable.exit_code).toBe(22);
    expect(unreachable.stderr).toContain('CONNECT tunnel failed, response 502');
    expect(unreachable.stderr).toContain(
      `\n[sandbox-mcp] The sandbox's egress proxy could not reach no-such-host.invalid:443 (the name does not resolve on the host), ` +
        `127.0.0.1:${pClosed} (connection refused), which the allow-list allows: it answered 502 Bad Gateway`,
    );
    await waitFor(() => logLines(s!, 'network unreachable').length >= 2, 'both failures in the log');
    expect(logLines(s!, 'network unreachable').map(({ t: _t, ...l }) => l)).toEqual([
      { level: 'warn', msg: 'network unreachable', sandbox_id: notesId, host: 'no-such-host.invalid', port: 443, reason: 'unresolvable' },
      { level: 'warn', msg: 'network unreachable', sandbox_id: notesId, host: '127.0.0.1', port: pClosed, reason: 'connection_refused' },
    ]);
    expect(logLines(s!, 'network denied')).toContainEqual(
      expect.objectContaining({ sandbox_id: notesId, host: 'localhost', port: p2, reason: 'private_address' }),
    );

    // A failed task's notes (text beside its view) name what was refused and what could not be reached while it ran — the
    // latter again within the minute. The view's times are whole seconds: a failure of the command just before, in the
    // same second, may be named too.
    const task = await ok(s!.client, 'start_task', {
      sandbox_id: notesId,
      command: 'curl -sS https://refused-task.example/; curl -sS https://no-such-host.invalid/',
    });
    const ended = await waitFor(async () => {
      const r = (await s!.client.callTool({
        name: 'get_task',
        arguments: { sandbox_id: notesId, task_id: task.task_id, wait: 5 },
      })) as CallToolResult;
      return (r.structuredContent as { state: string }).state !== 'running' ? r : undefined;
    }, 'the task to end');
    expect(ended.structuredContent).toMatchObject({ state: 'failed', exit_code: 56 });
    const notes = ended.content.map((c) => (c as { text: string }).text).join('\n');
    expect(notes).toMatch(/note: The sandbox's egress proxy refused (.*, )?refused-task\.example:443: not on this sandbox's allow-list/);
    expect(notes).toMatch(
      /note: The sandbox's egress proxy could not reach (.*, )?no-such-host\.invalid:443 \(the name does not resolve on the host\)/,
    );
  });

  it("forwards the Host of the URL it checked, refuses to expose the proxy's own port, and says why a tool that bypasses the proxy gets no DNS", async () => {
    const before = hostsSeenByOne.length;
    const r = await inNotesSandbox(`curl -sS -H 'Host: 127.0.0.1:${p2}' http://127.0.0.1:${p1}/`);
    expect(r.stdout).toBe('page one\n');
    expect(hostsSeenByOne.slice(before)).toEqual([`127.0.0.1:${p1}`]);
    const reserved = await toolError(s!.client, 'expose_port', { sandbox_id: notesId, port: 3128 });
    expect(reserved).toMatchObject({ category: 'invalid_argument', code: 'port_reserved' });
    expect(reserved.text).toContain("port: 3128 is the sandbox's egress proxy");
    // With an allow-list, a tool that ignores the proxy variables gets no DNS: the note says why.
    const direct = await inNotesSandbox(`curl -sS --noproxy '*' http://example.com/`);
    expect(direct.exit_code).toBe(6);
    expect(direct.stderr).toContain(
      `\n[sandbox-mcp] This sandbox reaches only 127.0.0.1:${p1}, localhost:${p2}, no-such-host.invalid, 127.0.0.1:${pClosed}, ` +
        'and only through its egress proxy (HTTP_PROXY/HTTPS_PROXY, http://127.0.0.1:3128)',
    );
    await ok(s!.client, 'kill_sandbox', { sandbox_id: notesId });
  });

  it('tells a failed command or task that its sandbox has no network when the output shows a network failure', async () => {
    const { sandbox_id: id } = await ok(s!.client, 'create_sandbox', { timeout: 300 });
    const lookup = 'curl -sS http://example.com/';
    const none = await ok(s!.client, 'run_command', { sandbox_id: id, command: lookup });
    expect(none.exit_code).toBe(6);
    expect(none.stderr).toContain('Could not resolve host');
    expect(none.stderr).toContain(
      "\n[sandbox-mcp] This sandbox has no network (only its own loopback: no DNS, no internet), and this command's output shows a failed name lookup or connection. " +
        `A sandbox gets its network when it is created: create one with network: {"allow_out": [...]} naming what it needs, within what this server permits (127.0.0.1:${p1}, localhost:${p2}, pypi.org, `,
    );
    // The same through background_after (finished before it), and on a failed task.
    const promoted = await ok(s!.client, 'run_command', { sandbox_id: id, command: lookup, background_after: 30 });
    expect(promoted.stderr).toContain('\n[sandbox-mcp] This sandbox has no network');
    const task = await ok(s!.client, 'start_task', { sandbox_id: id, command: lookup });
    const ended = await waitFor(async () => {
      const r = (await s!.client.callTool({
        name: 'get_task',
        arguments: { sandbox_id: id, task_id: task.task_id, wait: 5 },
      })) as CallToolResult;
      return (r.structuredContent as { state: string }).state !== 'running' ? r : undefined;
    }, 'the task to end');
    expect(ended.content.map((c) => (c as { text: string }).text).join('\n')).toContain('note: This sandbox has no network');
    // A failure that shows nothing of the network gets no such note.
    const other = await ok(s!.client, 'run_command', { sandbox_id: id, command: 'echo nope >&2; exit 3' });
    expect(other).toMatchObject({ exit_code: 3, stderr: 'nope\n' });
    await ok(s!.client, 'kill_sandbox', { sandbox_id: id });
  });
});

const NOBODY = { uid: 65534, gid: 65534 };
// Starting a server as another user needs root.
const asRoot = isRootOrSkipping('the network test of a server running as nobody');

describe.skipIf(!asRoot)('network through the MCP server running as an ordinary user (nobody)', () => {
  let nobodyDir = '';
  let u: StdioServer | undefined;

  beforeAll(async () => {
    requireCommands(['setpriv', 'curl', 'python3']);
    // A state directory nobody owns (tempStateDir's is root's).
    nobodyDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-network-nobody-'));
    chownSync(nobodyDir, NOBODY.uid, NOBODY.gid);
    u = await connectStdio({ SANDBOX_MCP_STATE_DIR: nobodyDir, SANDBOX_MCP_NETWORK_ALLOW: `127.0.0.1:${p1}` }, [], NOBODY);
  });
  afterAll(async () => {
    // A sandbox a failed test left (its task would retain it past the session) ends here, not at its timeout.
    try {
      for (const sb of u ? ((await ok(u.client, 'list_sandboxes', {})).sandboxes as { sandbox_id: string }[]) : []) {
        await u!.client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: sb.sandbox_id } });
      }
    } finally {
      await u?.close();
    }
    if (nobodyDir) rmSync(nobodyDir, { recursive: true, force: true });
  });

  it("reaches an allowed server through the proxy, gets a 403 for another, and serves a task's port until kill_sandbox", async () => {
    const meta = await ok(u!.client, 'create_sandbox', { timeout: 300, network: { allow_out: [`127.0.0.1:${p1}`] } });
    const id = meta.sandbox_id as string;
    // The non-root path: the keeper runs as nobody, so it enters the sandbox's user namespace to reach its network.
    const keeper = readKeeperRecord(join(nobodyDir, 'local', id.replace('local:', '')))!;
    expect(readFileSync(`/proc/${keeper.keeper.pid}/status`, 'utf8')).toMatch(/^Uid:\t65534\t/m);

    const before = hits.one;
    expect((await ok(u!.client, 'run_command', { command: `curl -sS http://127.0.0.1:${p1}/` })).stdout).toBe('page one\n');
    expect(hits.one).toBe(before + 1);
    const refused = await ok(u!.client, 'run_command', { command: `curl -sS -w ' %{http_code}' http://127.0.0.1:${p2}/` });
    expect(refused.stdout).toContain(`sandbox-mcp: 127.0.0.1:${p2} is not on this sandbox's egress allow-list`);
    expect(refused.stdout).toMatch(/ 403$/);
    expect(hits.two).toBe(0);

    await ok(u!.client, 'run_command', { command: 'mkdir -p ~/site && echo "served as nobody" > ~/site/index.html' });
    await ok(u!.client, 'start_task', { command: 'cd ~/site && exec python3 -m http.server 8000', timeout: 300 });
    const { url } = await ok(u!.client, 'expose_port', { port: 8000 });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    await waitFor(async () => (await get(url)) === 'served as nobody\n', 'the task to serve at the exposed URL');

    const netNs = heldNetNamespaceOf(keeper.pid1.pid);
    await ok(u!.client, 'kill_sandbox', { sandbox_id: id });
    expect(await get(url)).toBe('failed: ECONNREFUSED');
    expect(inNetNs(netNs)).toEqual([]);
  });
});
