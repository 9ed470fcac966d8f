// The pieces of principals that need no server: the tokens file's parser and loader, constant-time
// authentication, and the ownership scope over a provider (hidden reads as missing; owners read
// once; the operator's registry is the registry itself).
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../host/config/config.js';
import { ProviderError } from '../../host/providers/provider-error.js';
import { OPERATOR, type Principal } from '../../host/access/principal.js';
import { OwnerCache, scopeProviders } from '../../host/access/owner-scope.js';
import { lazyProvider } from '../../host/providers/registry.js';
import type { Provider } from '../../host/providers/provider.js';
import { runningSandbox } from '../support/running-sandbox.js';
import { TokenTable, hashToken, httpTokensFrom, loadTokensFile, parseTokensFile } from '../../host/access/tokens-file.js';

const dir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-principals-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ALICE = 'alice-token-0123456789';
const ROOT = 'root-token-0123456789a';

describe('tokens file', () => {
  it('parses name, role and hash, skipping comments and blank lines', () => {
    const entries = parseTokensFile(`# team\n\nalice user ${hashToken(ALICE)}\n  root\tadmin   ${hashToken(ROOT)}  \n`);
    expect(entries.map((e) => [e.name, e.role])).toEqual([
      ['alice', 'user'],
      ['root', 'admin'],
    ]);
  });

  it('names the bad line and never its content', () => {
    const cases: [string, RegExp][] = [
      [`alice user`, /line 1: expected three fields/],
      [`al/ice user ${hashToken(ALICE)}`, /line 1: the name must be/],
      [`alice root ${hashToken(ALICE)}`, /line 1: the role must be one of: user, admin/],
      [`alice user ${ALICE}`, /line 1: the hash must be sha256:/],
      [`alice user ${hashToken(ALICE)}\nalice admin ${hashToken(ROOT)}`, /line 2: the name is used on an earlier line/],
      [`alice user ${hashToken(ALICE)}\nbob admin ${hashToken(ALICE)}`, /line 2: the same token is given on an earlier line/],
      [`# nobody`, /names no principal/],
    ];
    for (const [text, message] of cases) {
      let error: unknown;
      try {
        parseTokensFile(text);
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain(ALICE);
      expect((error as Error).message).not.toContain(hashToken(ALICE).slice(7));
    }
  });

  it('refuses a file group or others may read or write', () => {
    const file = join(dir, 'tokens');
    writeFileSync(file, `alice user ${hashToken(ALICE)}\n`, { mode: 0o600 });
    expect(loadTokensFile(file)).toHaveLength(1);
    for (const mode of [0o640, 0o604, 0o620, 0o602]) {
      chmodSync(file, mode);
      expect(() => loadTokensFile(file)).toThrow('must not be readable or writable by group or others');
    }
    chmodSync(file, 0o600);
    expect(() => loadTokensFile(file, 12345)).toThrow("owned by the server's user");
    expect(() => loadTokensFile(join(dir, 'missing'))).toThrow('cannot be read');
  });

  it('refuses a token no Authorization: Bearer header could carry, in token-hash and SANDBOX_MCP_TOKEN, never quoting it', () => {
    const generate = () => 'generated-token-0123456789';
    // A space ends the token in `Bearer <token>`; non-ASCII arrives as other bytes; a control character cannot be sent.
    for (const token of ['correct horse battery staple', 'pässwörd-0123456789abc', 'tab\tseparated-0123456789']) {
      expect(() => hashToken(token), token).toThrow(/visible ASCII without spaces/);
      expect(() => httpTokensFrom({ SANDBOX_MCP_TOKEN: token }, undefined, generate), token).toThrow(
        /^SANDBOX_MCP_TOKEN must be visible ASCII without spaces/,
      );
      try {
        hashToken(token);
      } catch (error) {
        expect((error as Error).message).not.toContain(token.slice(0, 8));
      }
    }
    // Every visible ASCII character is fine, and the length rule still comes first.
    expect(hashToken('!"#$%&()*+,-./:;<=>?@[]^_`{|}~')).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(httpTokensFrom({ SANDBOX_MCP_TOKEN: 'Abc+/=-._~0123456789' }, undefined, generate).principals).toBe(0);
    expect(() => hashToken('short token')).toThrow(/at least 16 characters/);
  });

  it('authenticates each token to its principal and nothing else to anyone', () => {
    const table = TokenTable.named(parseTokensFile(`alice user ${hashToken(ALICE)}\nroot admin ${hashToken(ROOT)}`));
    expect(table.authenticate(ALICE)).toEqual({ kind: 'named', name: 'alice', role: 'user' });
    expect(table.authenticate(ROOT)).toEqual({ kind: 'named', name: 'root', role: 'admin' });
    expect(table.authenticate(ALICE + 'x')).toBeUndefined();
    expect(table.authenticate('')).toBeUndefined();
    expect(TokenTable.single(ALICE).authenticate(ALICE)).toBe(OPERATOR);
  });
});

/** An in-memory provider holding sandboxes by owner; counts getOwner reads. */
function ownersProvider() {
  const owners = new Map<string, string | null>();
  let n = 0;
  const reads = { getOwner: 0 };
  const gone = () => new ProviderError('not_found', { detail: 'provider-specific wording' });
  const known = async (id: string) => {
    if (!owners.has(id)) throw gone();
  };
  const provider: Provider = {
    id: 'local',
    async create(o) {
      const id = `sb${++n}`;
      owners.set(id, o.owner ?? null);
      return runningSandbox(id);
    },
    async list(o) {
      return [...owners].filter(([, owner]) => o.owner === undefined || owner === o.owner).map(([id]) => runningSandbox(id));
    },
    getInfo: async (id) => (await known(id), runningSandbox(id)),
    lifetimeEnd: async (id) => (await known(id), runningSandbox(id).end_at),
    setTimeout: known,
    kill: async (id) => {
      await known(id);
      owners.delete(id);
    },
    async getOwner(id) {
      reads.getOwner++;
      await known(id);
      return owners.get(id)!;
    },
    getEnvironment: async (id) => (await known(id), {}),
    exec: async () => {
      throw new ProviderError('unsupported');
    },
    readFile: async () => {
      throw new ProviderError('unsupported');
    },
    writeFile: async () => {
      throw new ProviderError('unsupported');
    },
    listFiles: async () => [],
    exposePort: async (id) => (await known(id), { url: 'http://127.0.0.1:1/' }),
    describeNetwork: async (id) => (await known(id), { egress: 'none', allow_out: [], proxy: null, exposed_ports: [] }),
    getWorkspace: async (id) => (await known(id), null),
    limitNotes: async (id) => (await known(id), [`limit note of ${id}`]),
    egressNotes: async (id, window) => (await known(id), [`refusals of ${id} since ${window.sinceMs}`]),
    usage: async (id) => (await known(id), { memoryBytes: { used: id.length, limit: null }, processes: null, diskBytes: null }),
    stopProcesses: async (id) => (await known(id), { stopped: 7 }),
    openTerminal: async (id) => {
      await known(id);
      throw new ProviderError('unsupported', { code: 'terminal_reached' });
    },
    snapshot: async (id, name) => (await known(id), { template: name, sizeBytes: 1, createdAt: 'now', note: `snapshot of ${id}` }),
    close: async () => undefined,
  };
  return { provider, owners, reads };
}

/** Every key of Provider, optional ones included: a key added to the interface fails to compile here until it is listed. */
const PROVIDER_KEYS = Object.keys({
  id: 0,
  agentNode: 0,
  templateNames: 0,
  create: 0,
  list: 0,
  getInfo: 0,
  lifetimeEnd: 0,
  setTimeout: 0,
  kill: 0,
  getOwner: 0,
  getEnvironment: 0,
  exec: 0,
  readFile: 0,
  writeFile: 0,
  listFiles: 0,
  exposePort: 0,
  describeNetwork: 0,
  getWorkspace: 0,
  imageWorkingDir: 0,
  limitNotes: 0,
  egressNotes: 0,
  usage: 0,
  stopProcesses: 0,
  openTerminal: 0,
  agentChannel: 0,
  execPromotable: 0,
  snapshot: 0,
  close: 0,
} satisfies Record<keyof Provider, 0>) as (keyof Provider)[];

describe('scopeProviders', () => {
  const alice: Principal = { kind: 'named', name: 'alice', role: 'user' };
  const bob: Principal = { kind: 'named', name: 'bob', role: 'user' };
  const admin: Principal = { kind: 'named', name: 'root', role: 'admin' };

  it("hides another principal's sandbox exactly as a missing one, and reads each owner once", async () => {
    const { provider, reads } = ownersProvider();
    const registry = { get: () => provider };
    const cache = new OwnerCache();
    const asAlice = scopeProviders(registry, alice, cache).get('local');
    const asBob = scopeProviders(registry, bob, cache).get('local');
    const a = (await asAlice.create({})).sandbox_id;
    expect(reads.getOwner).toBe(0); // known from create

    const hidden = await asBob.getInfo(a).catch((e: ProviderError) => e.toJSON());
    const missing = await asBob.getInfo('nope').catch((e: ProviderError) => e.toJSON());
    expect(hidden).toEqual(missing);
    expect(hidden).toMatchObject({ category: 'not_found', code: 'sandbox_not_found' });
    // A port of someone else's sandbox is as hidden as the sandbox.
    expect(await asBob.exposePort(a, 8000).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect(await asBob.describeNetwork(a).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect(await asAlice.exposePort(a, 8000)).toEqual({ url: 'http://127.0.0.1:1/' });

    const fresh = new OwnerCache();
    const asAliceLater = scopeProviders(registry, alice, fresh).get('local');
    for (let i = 0; i < 5; i++) await asAliceLater.getInfo(a);
    expect(reads.getOwner).toBe(2); // the missing id once, then alice's sandbox once for the new cache
    expect(await asBob.list({ limit: 10, offset: 0 })).toEqual([]);
    expect((await asAlice.list({ limit: 10, offset: 0 })).map((m) => m.sandbox_id)).toEqual([a]);
  });

  it('lets an admin see and touch everything, and records its name on what it creates', async () => {
    const { provider, owners } = ownersProvider();
    const registry = { get: () => provider };
    const cache = new OwnerCache();
    const a = (await scopeProviders(registry, alice, cache).get('local').create({})).sandbox_id;
    const asAdmin = scopeProviders(registry, admin, cache).get('local');
    await asAdmin.setTimeout(a, 10);
    const r = (await asAdmin.create({})).sandbox_id;
    expect(owners.get(r)).toBe('root');
    expect((await asAdmin.list({ limit: 10, offset: 0 })).map((m) => m.sandbox_id)).toEqual([a, r]);
    await asAdmin.kill(a);
    expect(owners.has(a)).toBe(false);
  });

  it('forwards every Provider method, optional ones included, behind the ownership check (limitNotes, egressNotes, usage, stopProcesses, openTerminal, snapshot)', async () => {
    const { provider } = ownersProvider();
    const registry = { get: () => provider };
    const cache = new OwnerCache();
    const asAlice = scopeProviders(registry, alice, cache).get('local');
    const asBob = scopeProviders(registry, bob, cache).get('local');
    for (const key of PROVIDER_KEYS) expect(typeof asAlice[key], key).toBe(key === 'id' || key === 'agentNode' ? 'string' : 'function');
    const a = (await asAlice.create({})).sandbox_id;
    expect(await asAlice.limitNotes!(a)).toEqual([`limit note of ${a}`]);
    const missing = await asBob.getInfo('nope').catch((e: ProviderError) => e.toJSON());
    expect(await asBob.limitNotes!(a).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect(await asAlice.egressNotes!(a, { sinceMs: 5 })).toEqual([`refusals of ${a} since 5`]);
    expect(await asBob.egressNotes!(a, { sinceMs: 5 }).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect(await asAlice.usage!(a)).toEqual({ memoryBytes: { used: a.length, limit: null }, processes: null, diskBytes: null });
    expect(await asBob.usage!(a).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect(await asAlice.stopProcesses!(a)).toEqual({ stopped: 7 });
    expect(await asBob.stopProcesses!(a).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect(await asAlice.getWorkspace!(a)).toBeNull();
    expect(await asBob.getWorkspace!(a).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    const terminal = { cols: 80, rows: 24, onData: () => undefined };
    expect(await asAlice.openTerminal!(a, terminal).catch((e: ProviderError) => e.code)).toBe('terminal_reached');
    expect(await asBob.openTerminal!(a, terminal).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    // The resident agent's channel and a promotable exec: as hidden as the sandbox (the stand-in has neither).
    expect(await asAlice.agentChannel!(a)).toBeNull();
    expect(await asBob.agentChannel!(a).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    const promote = { timeoutS: 1, promote: { taskId: 'f'.repeat(32), afterS: 1 } };
    expect(await asAlice.execPromotable!(a, 'true', promote)).toBeNull();
    expect(await asBob.execPromotable!(a, 'true', promote).catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    expect((await asAlice.snapshot!(a, 'snap')).note).toBe(`snapshot of ${a}`);
    expect(await asBob.snapshot!(a, 'snap').catch((e: ProviderError) => e.toJSON())).toEqual(missing);
    const { snapshot: _none, ...withoutSnapshots } = provider;
    const scoped = scopeProviders({ get: () => withoutSnapshots }, alice, cache).get('local');
    expect(await scoped.snapshot!(a, 'snap').catch((e: ProviderError) => e.code)).toBe('no_snapshots');
  });

  it('lazyProvider forwards every Provider method, optional ones included', async () => {
    const { provider } = ownersProvider();
    const lazy = lazyProvider('local', async () => provider);
    for (const key of PROVIDER_KEYS) expect(typeof lazy[key], key).toBe(key === 'id' || key === 'agentNode' ? 'string' : 'function');
    const a = (await lazy.create({})).sandbox_id;
    expect(await lazy.limitNotes(a)).toEqual([`limit note of ${a}`]);
    expect(await lazy.egressNotes(a, { sinceMs: 5 })).toEqual([`refusals of ${a} since 5`]);
    // A provider without limitNotes or egressNotes has none to give: [] (the interface's "unknown").
    const { limitNotes: _omitted, egressNotes: _alsoOmitted, ...withoutNotes } = provider;
    expect(await lazyProvider('local', async () => withoutNotes).limitNotes(a)).toEqual([]);
    expect(await lazyProvider('local', async () => withoutNotes).egressNotes(a, { sinceMs: 5 })).toEqual([]);
    expect(await lazy.usage(a)).toEqual({ memoryBytes: { used: a.length, limit: null }, processes: null, diskBytes: null });
    // One that measures nothing: every amount unknown (null), never 0.
    const { usage: _noUsage, ...withoutUsage } = provider;
    expect(await lazyProvider('local', async () => withoutUsage).usage(a)).toEqual({ memoryBytes: null, processes: null, diskBytes: null });
    expect(await lazy.stopProcesses(a)).toEqual({ stopped: 7 });
    // A provider without stopProcesses (e2b) says so, naming the tools that do the job there.
    const { stopProcesses: _noStop, ...withoutStop } = provider;
    const unsupported = await lazyProvider('e2b', async () => withoutStop)
      .stopProcesses(a)
      .then(
        () => null,
        (e: ProviderError) => e.toJSON(),
      );
    expect(unsupported).toMatchObject({ category: 'unsupported', code: 'no_stop_processes' });
    expect(unsupported?.suggestion).toMatch(/run_command \(kill or pkill\)/);
    expect((await lazy.snapshot(a, 'snap')).template).toBe('snap');
    const { snapshot: _none, ...withoutSnapshots } = provider;
    expect(
      await lazyProvider('local', async () => withoutSnapshots)
        .snapshot(a, 'snap')
        .catch((e: ProviderError) => e.code),
    ).toBe('no_snapshots');
  });

  it('gives the operator the registry itself: no checks, no owner recorded', async () => {
    const { provider, owners } = ownersProvider();
    const registry = { get: () => provider };
    expect(scopeProviders(registry, OPERATOR, new OwnerCache())).toBe(registry);
    const id = (await registry.get().create({})).sandbox_id;
    expect(owners.get(id)).toBeNull();
  });
});
