// Long and interactive commands with real local sandboxes (the suite: long-calls-suite.ts), and
// once over Streamable HTTP, where progress travels on the call's own event stream.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import {
  connectStdio,
  destroyAll,
  ok,
  requirePrerequisites,
  startHttp,
  tempStateDir,
  type HttpServer,
  type StdioServer,
} from './harness.js';
import { TEST_PROGRESS_INTERVAL_MS, describeLongCalls } from './long-calls-suite.js';

const stateDir = tempStateDir();
const env = { SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_PROGRESS_INTERVAL_MS: String(TEST_PROGRESS_INTERVAL_MS) };
const open: StdioServer[] = [];
let http: HttpServer | undefined;

beforeAll(() => requirePrerequisites());
afterAll(async () => {
  await Promise.allSettled(open.map((o) => o.close()));
  await http?.stop();
  await destroyAll(stateDir);
});

describeLongCalls(
  'local',
  async (args = []) => {
    const s = await connectStdio(env, args);
    open.push(s);
    return s;
  },
  { hasPrivateTmp: true },
);

describe('long calls over Streamable HTTP', () => {
  it('sends progress on the call stream and promotes a long call', async () => {
    http = await startHttp(env);
    const { client } = await http.connect();
    await ok(client, 'create_sandbox', {});
    const progress: Progress[] = [];
    const [slow, promoted] = await Promise.all([
      client.callTool({ name: 'run_command', arguments: { command: 'sleep 2; echo slow' } }, undefined, {
        onprogress: (p) => progress.push(p),
      }),
      ok(client, 'run_command', { command: 'sleep 30', background_after: 1 }),
    ]);
    expect(slow.structuredContent).toMatchObject({ exit_code: 0, stdout: 'slow\n' });
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(promoted).toMatchObject({ backgrounded: true, state: 'running' });
    expect(await ok(client, 'cancel_task', { sandbox_id: promoted.sandbox_id, task_id: promoted.task_id })).toMatchObject({
      state: 'cancelled',
    });
    await ok(client, 'kill_sandbox', {});
    await client.close();
  });
});
