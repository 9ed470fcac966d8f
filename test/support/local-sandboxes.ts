// Real local sandboxes for the provider's integration tests: a provider over a private state
// directory, the sandboxes a test file made (destroyed after it), and where their records live.
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { createLocalProvider, type LocalProviderOpts } from '../../host/providers/local/local-provider.js';
import { readKeeperRecord, type KeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import type { Provider } from '../../host/providers/provider.js';
import { KEEPER_SCRIPT } from './paths.js';
import { requireSandboxes } from './prerequisites.js';
import { destroyStateDir, tempStateDir } from './state-dir.js';

/** A clean environment for node child processes (NODE_EXTRA_CA_CERTS slows every start). */
export function cleanNodeEnv(): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin' };
}

/** One test file's local sandboxes; `provider` is set in beforeAll. */
export interface LocalSandboxes {
  stateDir: string;
  provider: Provider;
  /** Ids of every sandbox made through create(), or recorded by the test. */
  created: string[];
  /** Creates a sandbox with the file's provider and records it. */
  create(opts?: Parameters<Provider['create']>[0]): ReturnType<Provider['create']>;
  /** The sandbox's directory in the state directory. */
  sandboxDir(id: string): string;
  /** The sandbox's keeper record (throws when there is none). */
  keeperOf(id: string): KeeperRecord;
}

/**
 * Registers beforeAll/afterAll for a file's local sandboxes: bubblewrap and the build are
 * required (a failure, never a skip), and every sandbox left is destroyed with the state directory.
 * `opts` go to the provider (its state directory and keeper are the file's).
 */
export function localSandboxes(opts: Omit<LocalProviderOpts, 'stateDir' | 'keeperScript'> = {}): LocalSandboxes {
  const stateDir = tempStateDir();
  const sandboxes: LocalSandboxes = {
    stateDir,
    provider: undefined as unknown as Provider,
    created: [],
    async create(opts = {}) {
      const meta = await sandboxes.provider.create(opts);
      sandboxes.created.push(meta.sandbox_id);
      return meta;
    },
    sandboxDir: (id) => join(stateDir, 'local', id),
    keeperOf(id) {
      const rec = readKeeperRecord(sandboxes.sandboxDir(id));
      if (!rec) throw new Error('no keeper record');
      return rec;
    },
  };
  beforeAll(() => {
    requireSandboxes();
    sandboxes.provider = createLocalProvider({ ...opts, stateDir, keeperScript: KEEPER_SCRIPT });
  });
  afterAll(async () => {
    for (const id of sandboxes.created) await sandboxes.provider?.kill(id).catch(() => {});
    await sandboxes.provider?.close();
    await destroyStateDir(stateDir);
  });
  return sandboxes;
}
