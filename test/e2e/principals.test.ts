// Principals over HTTP, on both providers (local sandboxes, and e2b against the in-repo fake): a
// tokens file names alice and bob (users) and root (admin). A user's sandboxes and tasks do not
// exist for another user in any tool — the answer is byte for byte the one for an id that never
// existed — nor in their list; the admin sees everything; a session stays with its principal.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../host/access/tokens-file.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { connectStdio, type HttpServer, ok, serverEnv, startHttp, toolError } from '../support/built-server.js';
import { cgroupSituation } from '../support/cgroup-situation.js';
import { HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const TOKENS = {
  alice: 'alice-token-0123456789abcdef',
  bob: 'bob-token-0123456789abcdefgh',
  root: 'root-token-0123456789abcdefg',
};
const stateDir = tempStateDir();
const tokensDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-tokens-'));
const tokensFile = join(tokensDir, 'tokens');
let fake: FakeE2b;

beforeAll(async () => {
  requireSandboxes();
  writeFileSync(
    tokensFile,
    [
      '# name role hash',
      `alice user ${hashToken(TOKENS.alice)}`,
      `bob   user ${hashToken(TOKENS.bob)}`,
      `root  admin ${hashToken(TOKENS.root)}`,
    ].join('\n') + '\n',
    { mode: 0o600 },
  );
  fake = await startFakeE2b();
});
afterAll(async () => {
  await fake?.close();
  await destroyStateDir(stateDir);
  rmSync(tokensDir, { recursive: true, force: true });
});

type Who = keyof typeof TOKENS;
type Conn = { client: Client; transport: StreamableHTTPClientTransport };

/** A task's view once it is no longer running. */
async function finished(client: Client, at: { sandbox_id: string; task_id: string }): Promise<Record<string, any>> {
  return waitFor(async () => {
    const view = await ok(client, 'get_task', { ...at, wait: 10 });
    return view.state === 'running' ? undefined : view;
  }, 'the task to finish');
}

/** Every tool that takes a sandbox, with arguments that would change or reveal something if they ran. */
function sandboxCalls(sandboxId: string, taskId: string): [string, Record<string, unknown>][] {
  return [
    ['get_sandbox', { sandbox_id: sandboxId }],
    ['run_command', { sandbox_id: sandboxId, command: 'echo ran > ran.txt', envs: { BOB_KEY: 'alice-data' } }],
    ['run_code', { sandbox_id: sandboxId, code: 'print(1)' }],
    ['read_file', { sandbox_id: sandboxId, path: 'alice.txt' }],
    ['write_file', { sandbox_id: sandboxId, path: 'alice.txt', content: 'overwritten' }],
    ['list_files', { sandbox_id: sandboxId, path: '.' }],
    ['upload_file', { sandbox_id: sandboxId, path: 'alice.txt', data_base64: 'AAAA' }],
    ['download_file', { sandbox_id: sandboxId, path: 'alice.txt' }],
    ['start_task', { sandbox_id: sandboxId, command: 'echo ran > ran.txt' }],
    ['get_task', { sandbox_id: sandboxId, task_id: taskId }],
    ['send_task_input', { sandbox_id: sandboxId, task_id: taskId, data: 'from-bob\n' }],
    ['expose_port', { sandbox_id: sandboxId, port: 8000 }],
    ['cancel_task', { sandbox_id: sandboxId, task_id: taskId }],
    ['set_sandbox_timeout', { sandbox_id: sandboxId, timeout: 1 }],
    ['kill_sandbox', { sandbox_id: sandboxId }],
  ];
}

/**
 * Every tool that takes a sandbox answers `client` about `sandboxId` byte for byte as about
 * `missingId`, which never existed: not_found, except kill_sandbox, idempotent, whose answer
 * (already gone) differs only by the id it echoes.
 */
async function expectHiddenEverywhere(client: Client, sandboxId: string, taskId: string, missingId: string): Promise<void> {
  const missingCalls = sandboxCalls(missingId, taskId);
  for (const [index, [tool, args]] of sandboxCalls(sandboxId, taskId).entries()) {
    if (tool === 'kill_sandbox') {
      const hidden = await ok(client, tool, args);
      expect(hidden, tool).toEqual({ success: true, sandbox_id: sandboxId, destroyed: false });
      expect({ ...(await ok(client, tool, missingCalls[index]![1])), sandbox_id: sandboxId }, tool).toEqual(hidden);
      continue;
    }
    const hidden = await toolError(client, tool, args);
    const missing = await toolError(client, tool, missingCalls[index]![1]);
    expect(hidden.category, tool).toBe('not_found');
    expect(hidden.text, tool).toBe(missing.text);
  }
}

for (const provider of ['local', 'e2b'] as const) {
  describe(`principals over HTTP (${provider})`, () => {
    let server: HttpServer;
    const conns = {} as Record<Who, Conn>;
    const missingId = provider === 'local' ? 'local:zzzzzzzzzzzz' : 'e2b:nosuchsandbox1';

    beforeAll(async () => {
      server = await startHttp(
        { SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKENS_FILE: tokensFile, ...(provider === 'e2b' ? fake.env : {}) },
        ['--provider', provider],
      );
      for (const who of Object.keys(TOKENS) as Who[]) conns[who] = await server.connect({ authorization: `Bearer ${TOKENS[who]}` });
    });
    afterAll(async () => {
      for (const c of Object.values(conns)) await c.transport.terminateSession().catch(() => undefined);
      await server?.stop();
    });

    it("A's sandbox and task are not_found for B in every tool, exactly as an id that never existed; the admin sees both", async () => {
      const { bob, root } = { bob: conns.bob.client, root: conns.root.client };
      // Alice's own session ends during the test: her task must keep her sandbox whatever Bob tried.
      const aliceSession = await server.connect({ authorization: `Bearer ${TOKENS.alice}` });
      const alice = aliceSession.client;
      const a = (await ok(alice, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
      await ok(alice, 'write_file', { path: 'alice.txt', content: 'alice-data' });
      const task = (await ok(alice, 'start_task', { command: 'sleep 300', timeout: 600 })).task_id as string;
      // Bob's calls name this one: it reads one line, so it tells whose input reached it.
      const reader = (await ok(alice, 'start_task', { command: 'read x; echo got:$x', timeout: 600 })).task_id as string;
      const b = (await ok(bob, 'create_sandbox', { timeout: 600 })).sandbox_id as string;

      await expectHiddenEverywhere(bob, a, reader, missingId);
      const listed = (c: Client) =>
        ok(c, 'list_sandboxes', {}).then((r) => (r.sandboxes as { sandbox_id: string }[]).map((s) => s.sandbox_id));
      expect(await listed(bob)).toEqual([b]);
      expect(await listed(alice)).toEqual([a]);
      expect(await listed(root)).toEqual(expect.arrayContaining([a, b]));

      // Nothing B tried happened: the file, the task and the lifetime are A's as before, and B's
      // envs did not join the masking of A's output.
      expect((await ok(alice, 'read_file', { path: 'alice.txt' })).content).toBe('alice-data');
      expect((await ok(alice, 'run_command', { command: 'cat alice.txt; test -e ran.txt || echo absent' })).stdout).toBe(
        'alice-data' + 'absent\n',
      );
      expect((await ok(alice, 'get_task', { sandbox_id: a, task_id: task })).state).toBe('running');
      expect((await ok(alice, 'get_sandbox', { sandbox_id: a })).status).toBe('running');
      // Her own input reaches her task (Bob's never did: it would have read his line), and her own port is exposed.
      expect((await ok(alice, 'send_task_input', { sandbox_id: a, task_id: reader, data: 'alice\n' })).bytes_written).toBe(6);
      expect(await finished(alice, { sandbox_id: a, task_id: reader })).toMatchObject({ state: 'succeeded', stdout: 'got:alice\n' });
      expect(await ok(alice, 'expose_port', { sandbox_id: a, port: 8000 })).toMatchObject({
        sandbox_id: a,
        port: 8000,
        url: expect.any(String),
      });
      // A's session ends: the task retains the sandbox (B's kill_sandbox did not release it).
      await aliceSession.transport.terminateSession();
      await aliceSession.client.close();
      expect((await ok(root, 'get_sandbox', { sandbox_id: a })).status).toBe('running');

      // The admin reads and stops A's task, and destroys both sandboxes.
      expect((await ok(root, 'get_sandbox', { sandbox_id: a })).sandbox_id).toBe(a);
      expect((await ok(root, 'get_task', { sandbox_id: a, task_id: task })).state).toBe('running');
      expect((await ok(root, 'cancel_task', { sandbox_id: a, task_id: task })).state).toBe('cancelled');
      await ok(root, 'kill_sandbox', { sandbox_id: a });
      await ok(root, 'kill_sandbox', { sandbox_id: b });
      expect((await toolError(conns.alice.client, 'get_sandbox', { sandbox_id: a })).category).toBe('not_found');
    });

    it('a sandbox made over stdio or with the plain token (no owner) is not_found for a user in every tool, as a missing one; the admin sees it', async () => {
      const providerEnv = { SANDBOX_MCP_STATE_DIR: stateDir, ...(provider === 'e2b' ? fake.env : {}) };
      const providerArgs = ['--provider', provider, '--keep-sandboxes'];
      /** Makes a sandbox with a file and a task reading one line, through `client` (the operator); returns their ids. */
      const unowned = async (client: Client) => {
        const sandboxId = (await ok(client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
        await ok(client, 'write_file', { path: 'alice.txt', content: 'operator-data' });
        const taskId = (await ok(client, 'start_task', { command: 'read x; echo got:$x', timeout: 600 })).task_id as string;
        return { sandboxId, taskId };
      };
      const overStdio = await connectStdio(providerEnv, providerArgs);
      const fromStdio = await unowned(overStdio.client).finally(() => overStdio.close());
      const plain = await startHttp(providerEnv, providerArgs);
      const fromPlainToken = await plain
        .connect()
        .then(({ client }) => unowned(client))
        .finally(() => plain.stop());

      const root = conns.root.client;
      for (const { sandboxId, taskId } of [fromStdio, fromPlainToken]) {
        // One user is enough: users differ only by name, and neither name is recorded on these.
        const bob = conns.bob.client;
        await expectHiddenEverywhere(bob, sandboxId, taskId, missingId);
        const listed = ((await ok(bob, 'list_sandboxes', {})).sandboxes as { sandbox_id: string }[]).map((x) => x.sandbox_id);
        expect(listed).not.toContain(sandboxId);
        // Nothing the users tried happened: the admin finds the sandbox, its file and its task as they were.
        expect((await ok(root, 'get_sandbox', { sandbox_id: sandboxId })).status).toBe('running');
        expect((await ok(root, 'read_file', { sandbox_id: sandboxId, path: 'alice.txt' })).content).toBe('operator-data');
        expect(await ok(root, 'get_task', { sandbox_id: sandboxId, task_id: taskId })).toMatchObject({ state: 'running', stdout: '' });
        const all = ((await ok(root, 'list_sandboxes', {})).sandboxes as { sandbox_id: string }[]).map((x) => x.sandbox_id);
        expect(all).toContain(sandboxId);
        expect(await ok(root, 'kill_sandbox', { sandbox_id: sandboxId })).toMatchObject({ destroyed: true });
      }
    });

    if (provider === 'local') {
      // Named after the cgroup situation it covered; where a memory cgroup cannot be made, the test says so in its title.
      const situation = cgroupSituation();
      if (!situation.controllers.memory) {
        it(`${situation.name}: a named user asking for a memory limit is told it is unsupported here (no memory cgroup, so no note to give)`, async () => {
          expect((await toolError(conns.alice.client, 'create_sandbox', { memory: 128 })).category).toBe('unsupported');
        });
      } else {
        it(`${situation.name}: a named user gets the note on the limit its task met (get_task after a memory-limit kill)`, async () => {
          const alice = conns.alice.client;
          const id = (await ok(alice, 'create_sandbox', { timeout: 600, memory: 128 })).sandbox_id as string;
          const hog = `python3 -c "b = b'x' * ${256 * 1024 * 1024}; print('not killed')"`;
          const at = { sandbox_id: id, task_id: (await ok(alice, 'start_task', { sandbox_id: id, command: hog })).task_id as string };
          expect(await finished(alice, at)).toMatchObject({ state: 'failed', exit_code: 137 });
          const withNote = (await alice.callTool({ name: 'get_task', arguments: at })) as CallToolResult;
          const notes = withNote.content.slice(1).map((c) => (c as { text?: string }).text ?? '');
          expect(notes.join('\n')).toMatch(/^note: .*memory limit \(128 MB/);
          await ok(alice, 'kill_sandbox', { sandbox_id: id });
        });
      }
    }

    it("list_sandboxes pages through the principal's own sandboxes only (filtered before offset and limit)", async () => {
      const { alice, bob } = { alice: conns.alice.client, bob: conns.bob.client };
      for (let i = 0; i < 3; i++) await ok(alice, 'create_sandbox', { timeout: 600 });
      const mine = [
        (await ok(bob, 'create_sandbox', { timeout: 600 })).sandbox_id,
        (await ok(bob, 'create_sandbox', { timeout: 600 })).sandbox_id,
      ];
      const page = async (offset: number) =>
        ((await ok(bob, 'list_sandboxes', { limit: 1, offset })).sandboxes as { sandbox_id: string }[]).map((s) => s.sandbox_id);
      const seen = [...(await page(0)), ...(await page(1))];
      expect(seen.sort()).toEqual([...mine].sort());
      expect(await page(2)).toEqual([]);
    });

    it('another principal cannot use a session it did not open (it reads as no session)', async () => {
      const post = (token: string) =>
        fetch(server.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            authorization: `Bearer ${token}`,
            'mcp-session-id': conns.alice.transport.sessionId!,
            'mcp-protocol-version': '2025-06-18',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        });
      const stolen = await post(TOKENS.bob);
      expect(stolen.status).toBe(404);
      await stolen.text();
      const own = await post(TOKENS.alice);
      expect(own.status).toBe(200);
      await own.text();
    });
  });
}

describe('waiting calls and ownership (local)', () => {
  it("another user's waiting get_task on a sandbox whose waiting slots are full is not_found, as for a missing one, never wait_limit", async () => {
    // No resident agent: a waiting get is then an agent process in the sandbox, which the probe below can see.
    const server = await startHttp(
      { SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKENS_FILE: tokensFile, SANDBOX_MCP_RESIDENT_AGENT: '0' },
      ['--provider', 'local', '--max-waiting-gets', '1'],
    );
    // The test's own view of the sandboxes, to see the waiting call's agent process inside.
    const local = createLocalProvider({ stateDir });
    try {
      const alice = (await server.connect({ authorization: `Bearer ${TOKENS.alice}` })).client;
      const bob = (await server.connect({ authorization: `Bearer ${TOKENS.bob}` })).client;
      const a = (await ok(alice, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
      const task = { sandbox_id: a, task_id: (await ok(alice, 'start_task', { command: 'sleep 300', timeout: 600 })).task_id as string };
      // Alice's one waiting call holds the sandbox's one slot: its agent process runs inside once
      // the slot is taken (the pattern's brackets keep this probe's own command line from matching).
      const holding = ok(alice, 'get_task', { ...task, wait: 30 });
      const agentsWaiting = async () =>
        Number(
          (
            await local.exec(
              a.replace(/^local:/, ''),
              "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | grep -c 'agent.* [c]all '",
              {
                timeoutS: 30,
              },
            )
          ).stdout.toString(),
        );
      await waitFor(async () => (await agentsWaiting()) === 1, "alice's waiting call to hold the slot");
      expect((await toolError(alice, 'get_task', { ...task, wait: 5 })).code).toBe('wait_limit');

      const hidden = await toolError(bob, 'get_task', { ...task, wait: 5 });
      const missing = await toolError(bob, 'get_task', { ...task, sandbox_id: 'local:zzzzzzzzzzzz', wait: 5 });
      expect(hidden.category).toBe('not_found');
      expect(hidden.text).toBe(missing.text);

      // Her call was untouched: a change of state answers it.
      await ok(alice, 'cancel_task', task);
      expect((await holding).state).toBe('cancelled');
      await ok(alice, 'kill_sandbox', { sandbox_id: a });
    } finally {
      await local.close();
      await server.stop();
    }
  });
});

/** Runs the built CLI to its exit with `input` on stdin. */
function runCli(args: string[], env: Record<string, string>, input = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [HOST_JS, ...args], { env: serverEnv(env) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

describe('tokens file', () => {
  it('`sandbox-mcp token-hash` reads the token on stdin and prints the hash a tokens file holds', async () => {
    const made = await runCli(['token-hash'], {}, `${TOKENS.alice}\n`);
    expect(made).toMatchObject({ code: 0, stdout: `${hashToken(TOKENS.alice)}\n` });
    const short = await runCli(['token-hash'], {}, 'short');
    expect(short.code).toBe(2);
    expect(short.stderr).toContain('at least 16 characters');
  });

  it('is refused when group or others may read it, or with a plain token too, naming the problem and never a token', async () => {
    const open = join(tokensDir, 'open-tokens');
    writeFileSync(open, `alice user ${hashToken(TOKENS.alice)}\n`, { mode: 0o644 });
    const readable = await runCli(['http', '--port', '0'], { SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKENS_FILE: open });
    expect(readable.code).toBe(2);
    expect(readable.stderr).toContain('must not be readable or writable by group or others');

    const both = await runCli(['http', '--port', '0', '--tokens-file', tokensFile], {
      SANDBOX_MCP_STATE_DIR: stateDir,
      SANDBOX_MCP_TOKEN: TOKENS.root,
    });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('not both');

    const bad = join(tokensDir, 'bad-tokens');
    writeFileSync(bad, `alice user ${hashToken(TOKENS.alice)}\nbob superuser ${hashToken(TOKENS.bob)}\n`, { mode: 0o600 });
    const badRole = await runCli(['http', '--port', '0'], { SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKENS_FILE: bad });
    expect(badRole.code).toBe(2);
    expect(badRole.stderr).toContain('line 2: the role must be one of: user, admin');
    for (const r of [readable, both, badRole]) for (const token of Object.values(TOKENS)) expect(r.stderr).not.toContain(token);
    expect(badRole.stderr).not.toContain(hashToken(TOKENS.bob).slice(7));
  });
});
