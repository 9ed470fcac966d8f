// Templates belong to a principal (docs/principals.md): through the built `sandbox-mcp http` with a
// tokens file (alice and bob are users, root an admin), a user's snapshot is listed to and usable
// by that user (and admins) only, names are per user (alice's `py-dev` and bob's are two
// templates, and a plain name never means another user's), a user cannot take a shared
// template's name, an admin's snapshot is shared, and `sandbox-mcp template ls` shows owners.
// Local: real sandboxes on a template imported in the test; e2b: the in-repo fake of E2B's API.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../host/access/tokens-file.js';
import { TemplateListingSchema } from '../../host/cli/template.js';
import { FAKE_TEAM, startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { type HttpServer, ok, serverEnv, startHttp, toolError } from '../support/built-server.js';
import { makeMiniRootTar } from '../support/mini-root.js';
import { HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

const TOKENS = {
  alice: 'alice-token-0123456789abcdef',
  bob: 'bob-token-0123456789abcdefgh',
  root: 'root-token-0123456789abcdefg',
};
type Who = keyof typeof TOKENS;

const stateDir = tempStateDir();
const tokensDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-tokens-'));
const tokensFile = join(tokensDir, 'tokens');
let tarball = '';
let fake: FakeE2b;

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOST_JS, ...args], { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The server's connections, one per principal. */
async function connectAll(server: HttpServer): Promise<Record<Who, Client>> {
  const clients = {} as Record<Who, Client>;
  for (const who of Object.keys(TOKENS) as Who[]) clients[who] = (await server.connect({ authorization: `Bearer ${TOKENS[who]}` })).client;
  return clients;
}

/** create_sandbox's description as `client` is shown it. */
async function createDescription(client: Client): Promise<string> {
  return (await client.listTools()).tools.find((t) => t.name === 'create_sandbox')!.description ?? '';
}

async function run(client: Client, sandboxId: string, command: string): Promise<string> {
  const r = await ok(client, 'run_command', { sandbox_id: sandboxId, command });
  expect(r.exit_code, r.stderr).toBe(0);
  return r.stdout as string;
}

beforeAll(async () => {
  requireSandboxes();
  writeFileSync(
    tokensFile,
    `alice user ${hashToken(TOKENS.alice)}\nbob user ${hashToken(TOKENS.bob)}\nroot admin ${hashToken(TOKENS.root)}\n`,
    { mode: 0o600 },
  );
  tarball = makeMiniRootTar();
  const imported = await cli(['template', 'import', 'mini', tarball]);
  if (imported.code !== 0) throw new Error(`import failed: ${imported.stderr}`);
  fake = await startFakeE2b();
});

afterAll(async () => {
  await fake?.close();
  await destroyStateDir(stateDir);
  rmSync(tokensDir, { recursive: true, force: true });
  rmSync(tarball, { force: true });
});

describe('template owners (local)', () => {
  let server: HttpServer;
  let c: Record<Who, Client>;

  beforeAll(async () => {
    server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKENS_FILE: tokensFile }, ['--provider', 'local']);
    c = await connectAll(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("a user's snapshot is theirs alone: not listed to, nor usable by, another user; names never collide; an admin's is shared", async () => {
    const alices = await ok(c.alice, 'create_sandbox', { template: 'mini', timeout: 600 });
    await run(c.alice, alices.sandbox_id, 'mkdir -p ~/.aws && echo alice-key > ~/.aws/credentials');
    const priv = await ok(c.alice, 'snapshot_sandbox', { sandbox_id: alices.sandbox_id, name: 'alice-private' });
    expect(priv.template).toBe('alice/alice-private');

    // Listed to alice and the admin (with the owner), never to bob.
    expect(await createDescription(c.alice)).toContain('alice/alice-private');
    expect(await createDescription(c.root)).toContain('alice/alice-private');
    expect(await createDescription(c.bob)).not.toContain('alice-private');
    // Bob cannot start from it under either name: the same answer as a template that does not exist.
    const missing = await toolError(c.bob, 'create_sandbox', { template: 'no-such-template' });
    expect(missing.category).toBe('not_found');
    for (const template of ['alice-private', 'alice/alice-private']) {
      expect((await toolError(c.bob, 'create_sandbox', { template })).text, template).toBe(missing.text);
    }

    // Bob's `py-dev` and alice's are two templates; each plain name means the caller's own.
    const bobs = await ok(c.bob, 'create_sandbox', { template: 'mini', timeout: 600 });
    await run(c.bob, bobs.sandbox_id, 'echo bob-root > ~/whose');
    expect((await ok(c.bob, 'snapshot_sandbox', { sandbox_id: bobs.sandbox_id, name: 'py-dev' })).template).toBe('bob/py-dev');
    await run(c.alice, alices.sandbox_id, 'echo alice-root > ~/whose');
    expect((await ok(c.alice, 'snapshot_sandbox', { sandbox_id: alices.sandbox_id, name: 'py-dev' })).template).toBe('alice/py-dev');
    const alice2 = await ok(c.alice, 'create_sandbox', { template: 'py-dev', timeout: 600 });
    expect(alice2.template).toBe('alice/py-dev');
    expect(await run(c.alice, alice2.sandbox_id, 'cat ~/whose')).toBe('alice-root\n');
    expect((await toolError(c.alice, 'create_sandbox', { template: 'bob/py-dev' })).text).toBe(missing.text);

    // A user cannot take a shared template's name (their plain name would stop meaning the shared one).
    expect(await toolError(c.bob, 'snapshot_sandbox', { sandbox_id: bobs.sandbox_id, name: 'mini' })).toMatchObject({
      category: 'conflict',
      code: 'shared_template_name',
    });
    // An admin's snapshot is shared: listed to every user and usable by them.
    expect((await ok(c.root, 'snapshot_sandbox', { sandbox_id: bobs.sandbox_id, name: 'team-base' })).template).toBe('team-base');
    expect(await createDescription(c.alice)).toContain('team-base');
    // The admin may use alice's: the file is there.
    const rootCopy = await ok(c.root, 'create_sandbox', { template: 'alice/alice-private', timeout: 600 });
    expect(await run(c.root, rootCopy.sandbox_id, 'cat ~/.aws/credentials')).toBe('alice-key\n');

    // The operator's listing shows each template's owner; rm takes OWNER/NAME.
    const listed = await cli(['template', 'ls', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const owners = Object.fromEntries(
      TemplateListingSchema.parse(JSON.parse(listed.stdout)).templates.map((t) => [`${t.owner ?? ''}/${t.name}`, t]),
    );
    expect(Object.keys(owners).sort()).toEqual(['/mini', '/team-base', 'alice/alice-private', 'alice/py-dev', 'bob/py-dev']);
    const table = await cli(['template', 'ls']);
    expect(table.stdout).toMatch(/^alice\/alice-private\s+alice\s/m);
    expect(table.stdout).toMatch(/^mini\s+shared\s/m);
    const removed = await cli(['template', 'rm', 'bob/py-dev']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(await createDescription(c.root)).not.toContain('bob/py-dev');
  });
});

describe('template owners (e2b)', () => {
  let server: HttpServer;
  let c: Record<Who, Client>;

  beforeAll(async () => {
    server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_TOKENS_FILE: tokensFile, ...fake.env }, ['--provider', 'e2b']);
    c = await connectAll(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("a user's E2B snapshot is not usable by another user, and no user can replace another's or a shared one", async () => {
    const alices = await ok(c.alice, 'create_sandbox', {});
    await ok(c.alice, 'write_file', { sandbox_id: alices.sandbox_id, path: 'credentials', content: 'alice-key' });
    const priv = (await ok(c.alice, 'snapshot_sandbox', { sandbox_id: alices.sandbox_id, name: 'py-dev' })).template as string;
    const alice2 = await ok(c.alice, 'create_sandbox', { template: priv });
    expect((await ok(c.alice, 'read_file', { sandbox_id: alice2.sandbox_id, path: 'credentials' })).content).toBe('alice-key');

    // Bob cannot start from it, by its id or its bare name: exactly what E2B's answer for a
    // template it does not have becomes (the fake's 404 for a name in its team's namespace).
    const missing = await toolError(c.bob, 'create_sandbox', { template: `${FAKE_TEAM}/no-such-snapshot` });
    expect(missing).toMatchObject({ category: 'not_found' });
    const bare = priv.replace(/^[^/]*\//, '').replace(/:[^:]*$/, '');
    for (const template of [priv, bare, bare.toUpperCase()]) {
      expect((await toolError(c.bob, 'create_sandbox', { template })).text, template).toBe(missing.text);
    }

    // Bob's `py-dev` is another snapshot: alice's still holds her file.
    const bobs = await ok(c.bob, 'create_sandbox', {});
    await ok(c.bob, 'write_file', { sandbox_id: bobs.sandbox_id, path: 'credentials', content: 'bob-root' });
    const bobSnap = (await ok(c.bob, 'snapshot_sandbox', { sandbox_id: bobs.sandbox_id, name: 'py-dev' })).template as string;
    expect(bobSnap).not.toBe(priv);
    const alice3 = await ok(c.alice, 'create_sandbox', { template: priv });
    expect((await ok(c.alice, 'read_file', { sandbox_id: alice3.sandbox_id, path: 'credentials' })).content).toBe('alice-key');
    // The admin's snapshot is shared under its own name, which no user's can be.
    expect((await ok(c.root, 'snapshot_sandbox', { sandbox_id: bobs.sandbox_id, name: 'py-dev' })).template).toMatch(/(^|\/)py-dev(:|$)/);
    expect(await toolError(c.root, 'snapshot_sandbox', { sandbox_id: bobs.sandbox_id, name: bare })).toMatchObject({
      category: 'invalid_argument',
    });
    // The admin may use alice's.
    await ok(c.root, 'create_sandbox', { template: priv });
  });

  it("a user's E2B snapshot is refused to another user however it is written (its template id too); shared snapshots and other templates are not", async () => {
    const alices = await ok(c.alice, 'create_sandbox', {});
    await ok(c.alice, 'write_file', { sandbox_id: alices.sandbox_id, path: 'credentials', content: 'alice-id-key' });
    const priv = (await ok(c.alice, 'snapshot_sandbox', { sandbox_id: alices.sandbox_id, name: 'by-id' })).template as string;
    // E2B's create also takes the snapshot's underlying template id, which says nothing of its owner.
    const id = fake.snapshot(priv)!.templateId;
    const alice2 = await ok(c.alice, 'create_sandbox', { template: id });
    expect((await ok(c.alice, 'read_file', { sandbox_id: alice2.sandbox_id, path: 'credentials' })).content).toBe('alice-id-key');

    // Bob, however he writes it: exactly the answer for a template E2B does not have, and nothing is created.
    const missing = await toolError(c.bob, 'create_sandbox', { template: `${FAKE_TEAM}/no-such-snapshot` });
    expect(missing.category).toBe('not_found');
    const creates = () => fake.calls.filter((call) => call.method === 'POST' && call.path === '/v2/sandboxes').length;
    const before = creates();
    const bare = priv.replace(/^[^/]*\//, '').replace(/:[^:]*$/, '');
    for (const template of [
      id,
      `${id}:default`,
      id.toUpperCase(),
      ` ${id}\t`,
      `\u0085${id}:DEFAULT `,
      `${FAKE_TEAM.toUpperCase()}/${bare.toUpperCase()}`,
      ` ${bare}`,
      `\u00a0${priv}`,
    ]) {
      expect((await toolError(c.bob, 'create_sandbox', { template })).text, JSON.stringify(template)).toBe(missing.text);
    }
    expect(creates()).toBe(before);

    // A shared snapshot (the admin's) is everyone's, by its id and its name; so is any other template.
    const roots = await ok(c.root, 'create_sandbox', {});
    await ok(c.root, 'write_file', { sandbox_id: roots.sandbox_id, path: 'team.txt', content: 'team-wide' });
    const shared = (await ok(c.root, 'snapshot_sandbox', { sandbox_id: roots.sandbox_id, name: 'team-by-id' })).template as string;
    for (const template of [fake.snapshot(shared)!.templateId, shared]) {
      const bobs = await ok(c.bob, 'create_sandbox', { template });
      expect((await ok(c.bob, 'read_file', { sandbox_id: bobs.sandbox_id, path: 'team.txt' })).content, template).toBe('team-wide');
    }
    // Any other template: E2B's, and another team's by its namespace (whose snapshots E2B refuses
    // to list to this team: a 400, which names none of the team's).
    for (const template of ['base', 'other-team/base']) await ok(c.bob, 'create_sandbox', { template });
    // The admin may use alice's by its id.
    const rootCopy = await ok(c.root, 'create_sandbox', { template: id });
    expect((await ok(c.root, 'read_file', { sandbox_id: rootCopy.sandbox_id, path: 'credentials' })).content).toBe('alice-id-key');
  });
});
