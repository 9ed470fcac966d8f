// snapshot_sandbox on E2B through the built server and CLI, the real `e2b` SDK and the in-repo fake
// of E2B's APIs (which does not establish real cloud support): E2B's own snapshot API is called
// (POST /sandboxes/{id}/snapshots with the name), the sandbox is paused while it is taken and runs
// on, and a sandbox created from the returned template starts with the snapshot's files.
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { SnapshotResultSchema } from '../../host/cli/snapshot.js';
import { E2B_SNAPSHOT_NOTE } from '../../host/providers/e2b/snapshots.js';
import { FAKE_TEAM } from '../e2b-fake/index.js';
import { connectStdio, ok, serverEnv, toolError, type StdioServer } from '../support/built-server.js';
import { fakeE2bServers, lifetimeCalls } from '../support/fake-e2b-servers.js';
import { HOST_JS } from '../support/paths.js';

const e2b = fakeE2bServers();

async function server(): Promise<StdioServer> {
  const s = await connectStdio(e2b.fake.env, ['--provider', 'e2b']);
  e2b.open.push(s);
  return s;
}

const rawId = (qualified: string) => qualified.replace(/^e2b:/, '');

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOST_JS, ...args], { env: serverEnv(e2b.fake.env) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('snapshot_sandbox on e2b (against the fake)', () => {
  it("maps to E2B's snapshot API; a sandbox created from the result starts with its files; the sandbox runs on", async () => {
    const s = await server();
    const sb = await ok(s.client, 'create_sandbox', { timeout: 600 });
    await ok(s.client, 'write_file', { path: 'notes/state.txt', content: 'step 1\n' });
    const endAt = e2b.fake.sandbox(rawId(sb.sandbox_id))!.endAt.getTime();
    const mark = e2b.fake.calls.length;

    const snap = SnapshotResultSchema.parse(await ok(s.client, 'snapshot_sandbox', { name: 'my-state' }));
    expect(snap).toEqual({
      sandbox_id: sb.sandbox_id,
      template: `${FAKE_TEAM}/my-state:default`,
      size_bytes: null,
      created_at: expect.any(String),
      note: E2B_SNAPSHOT_NOTE,
    });
    expect(snap.note).toContain("this server's tasks are not carried over");
    const calls = e2b.fake.calls.slice(mark);
    expect(calls.map((c) => `${c.method} ${c.path}`)).toEqual([`POST /sandboxes/${rawId(sb.sandbox_id)}/snapshots`]);
    expect(calls[0]!.body).toEqual({ name: 'my-state' });
    // E2B pauses the sandbox while it takes the snapshot; afterwards it runs on, its lifetime unchanged.
    expect(e2b.fake.snapshot(snap.template)!.sandboxStateDuringCopy).toBe('paused');
    expect(await ok(s.client, 'get_sandbox', {})).toMatchObject({ status: 'running' });
    expect(e2b.fake.sandbox(rawId(sb.sandbox_id))!.endAt.getTime()).toBe(endAt);
    expect(lifetimeCalls(e2b.fake, mark)).toEqual([]);

    // Later changes are the original's alone.
    await ok(s.client, 'write_file', { sandbox_id: sb.sandbox_id, path: 'notes/state.txt', content: 'step 2\n' });
    const copy = await ok(s.client, 'create_sandbox', { template: snap.template, timeout: 600 });
    expect(copy.template).toBe(snap.template);
    expect((await ok(s.client, 'read_file', { sandbox_id: copy.sandbox_id, path: 'notes/state.txt' })).content).toBe('step 1\n');
    expect((await ok(s.client, 'read_file', { sandbox_id: sb.sandbox_id, path: 'notes/state.txt' })).content).toBe('step 2\n');
  });

  it('is refused for a sandbox that does not exist, and for a bad name before any call, naming `name`', async () => {
    const s = await server();
    const missing = await toolError(s.client, 'snapshot_sandbox', { sandbox_id: 'e2b:fake0000000000000000', name: 'x' });
    expect(missing.category).toBe('not_found');
    const mark = e2b.fake.calls.length;
    const bad = await toolError(s.client, 'snapshot_sandbox', { sandbox_id: 'e2b:fake0000000000000000', name: 'Not OK' });
    expect(bad.category).toBe('invalid_argument');
    expect(bad.suggestion).toContain('name');
    expect(bad.text).not.toContain('Not OK');
    expect(e2b.fake.calls.length).toBe(mark);
  });

  it('`sandbox-mcp snapshot <id> NAME` does the same from the command line (--json: the tool result)', async () => {
    const s = await server();
    const sb = await ok(s.client, 'create_sandbox', { timeout: 600 });
    await ok(s.client, 'write_file', { path: 'a.txt', content: 'from the cli\n' });

    const human = await cli(['snapshot', sb.sandbox_id, 'cli-snap']);
    expect(human.stderr).toBe('');
    expect(human.code).toBe(0);
    expect(human.stdout).toBe(`saved ${sb.sandbox_id} as template ${FAKE_TEAM}/cli-snap:default\n${E2B_SNAPSHOT_NOTE}\n`);

    const json = await cli(['snapshot', sb.sandbox_id, 'cli-snap', '--json']);
    expect(json.code).toBe(0);
    // The name exists: E2B assigns the new snapshot to the same template.
    expect(SnapshotResultSchema.parse(JSON.parse(json.stdout))).toMatchObject({
      sandbox_id: sb.sandbox_id,
      template: `${FAKE_TEAM}/cli-snap:default`,
    });

    const bad = await cli(['snapshot', sb.sandbox_id, 'Bad Name']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('NAME must be lowercase letters');
    const gone = await cli(['snapshot', 'e2b:fake0000000000000000', 'x']);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^sandbox-mcp: not_found: /);
  });
});
