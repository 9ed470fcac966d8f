// One e2e file's fake of E2B and the stdio servers it starts against it: the fake starts in
// beforeAll (the build and bubblewrap required, as every e2e file), and both end in afterAll.
import { afterAll, beforeAll } from 'vitest';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import type { StdioServer } from './built-server.js';
import { requireSandboxes } from './prerequisites.js';

/** The file's fake (set in beforeAll) and the servers to close after it. */
export interface FakeE2bServers {
  readonly fake: FakeE2b;
  /** Servers started by the file; each is closed in afterAll. */
  readonly open: StdioServer[];
}

/** Registers the hooks of a file whose servers talk to the fake of E2B. */
export function fakeE2bServers(): FakeE2bServers {
  let fake: FakeE2b | undefined;
  const open: StdioServer[] = [];
  beforeAll(async () => {
    requireSandboxes();
    fake = await startFakeE2b();
  });
  afterAll(async () => {
    await Promise.allSettled(open.map((o) => o.close()));
    await fake?.close();
  });
  return {
    get fake() {
      if (!fake) throw new Error('the fake of E2B starts in beforeAll');
      return fake;
    },
    open,
  };
}

/** Control-plane calls since `fromIndex` that change a lifetime: any /timeout, and any connect the fake saw lengthen one. */
export function lifetimeCalls(fake: FakeE2b, fromIndex = 0): FakeE2b['calls'] {
  return fake.calls
    .slice(fromIndex)
    .filter((c) => /\/timeout$/.test(c.path) || (c.extendedLifetime !== false && c.path.endsWith('/connect')));
}
