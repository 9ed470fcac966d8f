// Long and interactive commands on the e2b provider: the real `e2b` SDK against the in-repo fake
// of E2B's APIs (the suite: long-calls-suite.ts).
import { TEST_PROGRESS_INTERVAL_MS, describeLongCalls } from './long-calls-suite.js';
import { connectStdio } from '../support/built-server.js';
import { fakeE2bServers, lifetimeCalls } from '../support/fake-e2b-servers.js';

const e2b = fakeE2bServers();

describeLongCalls(
  'e2b',
  async (args = []) => {
    const s = await connectStdio({ ...e2b.fake.env, SANDBOX_MCP_PROGRESS_INTERVAL_MS: String(TEST_PROGRESS_INTERVAL_MS) }, [
      '--provider',
      'e2b',
      ...args,
    ]);
    e2b.open.push(s);
    return s;
  },
  {
    hasPrivateTmp: false,
    lifetimeCalls: () => lifetimeCalls(e2b.fake).length,
  },
);
