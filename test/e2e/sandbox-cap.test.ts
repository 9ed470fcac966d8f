// --max-sandboxes holds for a state directory, whichever server processes share it: several
// stdio clients, each with a server of its own on the default state directory, is the common
// case. Four built servers here create at the same moment, round after round.
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { localServers, ok, type StdioServer } from '../support/built-server.js';

const MAX = 3;
const SERVERS = 4;
const CREATES_EACH = 2;
const ROUNDS = 4;
const local = localServers();
const servers: StdioServer[] = [];

beforeAll(async () => {
  for (let i = 0; i < SERVERS; i++) servers.push(await local.connect({ SANDBOX_MCP_MAX_SANDBOXES: String(MAX) }));
});

describe('the live-sandbox cap across server processes', () => {
  it(`${SERVERS} servers on one state directory, ${CREATES_EACH} creates each at once: never more than --max-sandboxes ${MAX}`, async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const results = await Promise.all(
        servers.flatMap((s) =>
          Array.from(
            { length: CREATES_EACH },
            async () => (await s.client.callTool({ name: 'create_sandbox', arguments: { timeout: 120 } })) as CallToolResult,
          ),
        ),
      );
      const refused = results.filter((r) => r.isError).map((r) => JSON.parse((r.content[0] as { text: string }).text).error);
      for (const e of refused) expect(e).toMatchObject({ category: 'insufficient_resources', code: 'sandbox_limit' });
      const live = (await ok(servers[0]!.client, 'list_sandboxes', {})).sandboxes as { sandbox_id: string }[];
      expect({ round, live: live.length, created: results.length - refused.length }).toEqual({ round, live: MAX, created: MAX });
      for (const sb of live) await ok(servers[0]!.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    }
  });
});
