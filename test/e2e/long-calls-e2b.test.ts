// Long and interactive commands on the e2b provider: the real `e2b` SDK against the in-repo fake
// of E2B's APIs (the suite: long-calls-suite.ts).
import { afterAll, beforeAll } from 'vitest';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { connectStdio, requirePrerequisites, type StdioServer } from './harness.js';
import { TEST_PROGRESS_INTERVAL_MS, describeLongCalls } from './long-calls-suite.js';

let fake: FakeE2b;
const open: StdioServer[] = [];

beforeAll(async () => {
  requirePrerequisites();
  fake = await startFakeE2b();
});
afterAll(async () => {
  await Promise.allSettled(open.map((o) => o.close()));
  await fake?.close();
});

describeLongCalls(
  'e2b',
  async (args = []) => {
    const s = await connectStdio({ ...fake.env, SANDBOX_MCP_PROGRESS_INTERVAL_MS: String(TEST_PROGRESS_INTERVAL_MS) }, [
      '--provider',
      'e2b',
      ...args,
    ]);
    open.push(s);
    return s;
  },
  {
    hasPrivateTmp: false,
    // As in e2b-walk.test.ts: any /timeout, and any connect the fake saw lengthen a lifetime.
    lifetimeCalls: () =>
      fake.calls.filter((c) => /\/timeout$/.test(c.path) || (c.extendedLifetime !== false && c.path.endsWith('/connect'))).length,
  },
);
