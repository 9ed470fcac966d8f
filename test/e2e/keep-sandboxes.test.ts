// What becomes of a session's sandboxes when it ends: by default a stdio session destroys them
// and says so in create_sandbox's text (clients that start a server per call would otherwise lose
// them unawares), except one in which a task was started (by any server process sharing the
// state); with --keep-sandboxes / SANDBOX_MCP_KEEP_SANDBOXES=1 they live to their deadline.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { CLEANUP_NOTE } from '../../host/mcp/tools/sandboxes.js';
import { localServers, ok, startHttp, type StdioServer } from '../support/built-server.js';
import { waitFor } from '../support/wait.js';

const servers = localServers();
let provider: Provider;

beforeAll(() => {
  provider = createLocalProvider({ stateDir: servers.stateDir });
});
afterAll(async () => {
  await provider?.close();
});

/** create_sandbox's whole result: the JSON text, any further text, and the structured metadata. */
async function create(s: { client: StdioServer['client'] }): Promise<{ id: string; texts: string[] }> {
  const r = (await s.client.callTool({ name: 'create_sandbox', arguments: { timeout: 300 } })) as CallToolResult;
  expect(r.isError).toBeFalsy();
  const texts = r.content.filter((c): c is { type: 'text'; text: string } => c.type === 'text').map((c) => c.text);
  expect(JSON.parse(texts[0]!)).toEqual(r.structuredContent);
  return { id: String((r.structuredContent as { sandbox_id: string }).sandbox_id).replace(/^local:/, ''), texts };
}

async function isLive(id: string): Promise<boolean> {
  return (await provider.list({ limit: 1000, offset: 0 })).some((m) => m.sandbox_id === id);
}

describe('sandboxes at the end of a session', () => {
  it('stdio, by default: the create result says the sandbox ends with the session, and it does', async () => {
    const s = await servers.connect();
    const { id, texts } = await create(s);
    expect(texts).toHaveLength(2);
    expect(texts[1]).toBe(CLEANUP_NOTE);
    expect(texts[1]).toContain('destroyed when this MCP session ends');
    expect(texts[1]).toContain('unless a task is started in it');
    expect(texts[1]).toContain('--keep-sandboxes');
    expect(s.client.getInstructions()).toContain('destroyed when this session ends');
    expect(await isLive(id)).toBe(true);
    await s.close();
    expect(await isLive(id)).toBe(false);
  });

  it('keeps a sandbox in which another server process started a task (its output still readable there), destroys the other', async () => {
    // Two clients, two server processes, one state directory: B may work in a sandbox A created.
    const a = await servers.connect();
    const b = await servers.connect();
    try {
      const withTask = await create(a);
      const bare = await create(a);
      const handle = {
        sandbox_id: `local:${withTask.id}`,
        task_id: (await ok(b.client, 'start_task', { sandbox_id: `local:${withTask.id}`, command: 'echo from-b' })).task_id as string,
      };
      // Finished before A leaves: a finished task's saved output is what B may still read.
      await waitFor(async () => (await ok(b.client, 'get_task', { ...handle, wait: 5 })).state === 'succeeded', 'the task to finish');
      await a.close();
      const closed = a
        .stderr()
        .split('\n')
        .find((l) => l.includes('"session closed"'));
      expect(JSON.parse(closed!)).toMatchObject({ destroyed: 1, kept: 1, holding_tasks: 1, unanswered: 0 });
      expect(await isLive(withTask.id)).toBe(true);
      expect(await isLive(bare.id)).toBe(false);
      expect(await ok(b.client, 'get_task', handle)).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'from-b\n' });
      await ok(b.client, 'kill_sandbox', { sandbox_id: handle.sandbox_id });
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('--keep-sandboxes: no note, the instructions say sandboxes outlive the session, and the sandbox does', async () => {
    const s = await servers.connect({}, ['--keep-sandboxes']);
    const { id, texts } = await create(s);
    expect(texts).toHaveLength(1);
    expect(s.client.getInstructions()).toContain('outlive this session until their timeout');
    await s.close();
    expect(await isLive(id)).toBe(true);
    const info = await provider.getInfo(id);
    // Still bounded by its own deadline.
    expect(Date.parse(info.end_at!)).toBeLessThanOrEqual(Date.now() + 300_000);
    await provider.kill(id);
  });

  it('SANDBOX_MCP_KEEP_SANDBOXES=1 does the same as the flag', async () => {
    const s = await servers.connect({ SANDBOX_MCP_KEEP_SANDBOXES: '1' });
    const { id, texts } = await create(s);
    expect(texts).toHaveLength(1);
    await s.close();
    expect(await isLive(id)).toBe(true);
    await provider.kill(id);
  });

  it('http sessions carry no note (a session there outlives single calls)', async () => {
    const server = await startHttp({ SANDBOX_MCP_STATE_DIR: servers.stateDir });
    try {
      const { client } = await server.connect();
      const { id, texts } = await create({ client });
      expect(texts).toHaveLength(1);
      await provider.kill(id);
      await client.close();
    } finally {
      await server.stop();
    }
  });
});
