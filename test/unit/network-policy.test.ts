// The allow-list contract (host/providers/network-policy.ts) and its uses that need no sandbox: the entry
// grammar, matching, the permitted-set check, the destinations the proxy may connect to, the
// proxy variables, the server's configuration and create_sandbox's `network` argument.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type ServerConfig } from '../../host/config/config.js';
import { ProviderError } from '../../host/providers/provider-error.js';
import {
  ALLOW_LIST_PRESETS,
  entryAllows,
  expandAllowList,
  formatAllowEntry,
  isPermitted,
  parseAllowEntry,
  parseAllowList,
  requestHost,
} from '../../host/providers/network-policy.js';
import { proxyEnvironment } from '../../host/providers/local/launch/environment.js';
import { FailureLog, readFailures } from '../../host/providers/local/network/failure-log.js';
import { egressFailureNotes, failuresInFile } from '../../host/providers/local/network/failure-notes.js';
import { FailureMemory, type EgressFailureRecord } from '../../host/providers/local/network/egress-failures.js';
import { isNonPublicAddress, nonPublicKind, resolveDestination, type Resolver } from '../../host/providers/local/network/destinations.js';
import { checkNetwork } from '../../host/cli/doctor/network-check.js';
import { createNetworkOpts } from '../../host/providers/e2b/network.js';
import { networkSummary, resolveNetworkArg } from '../../host/mcp/tools/network.js';

describe('allow-list entries', () => {
  it('parses host names, wildcards and addresses with optional ports into a canonical form', () => {
    const cases: [string, string][] = [
      ['PyPI.org', 'pypi.org'],
      ['*.Example.com:8443', '*.example.com:8443'],
      ['127.0.0.1:8080', '127.0.0.1:8080'],
      ['[0:0:0:0:0:0:0:1]:80', '[::1]:80'],
      ['[2001:DB8::1]', '[2001:db8::1]'],
      ['files.pythonhosted.org', 'files.pythonhosted.org'],
    ];
    for (const [text, canonical] of cases) {
      const e = parseAllowEntry(text);
      expect(e && formatAllowEntry(e), text).toBe(canonical);
      expect(parseAllowEntry(canonical)).toEqual(e);
    }
  });

  it('refuses everything else', () => {
    for (const bad of [
      '',
      'http://pypi.org',
      'pypi.org/simple',
      'pypi.org:0',
      'pypi.org:65536',
      'pypi.org:080',
      '*',
      '*.',
      'a.*.com',
      '::1',
      '[::1',
      '[fe80::1%eth0]',
      '127.1',
      '010.0.0.1',
      '-bad.com',
      'under_score.com',
      'x'.repeat(64) + '.com',
      '1.2.3',
    ]) {
      expect(parseAllowEntry(bad), bad).toBeNull();
    }
  });

  it('allows exact names, subdomains of a wildcard (never its apex), and the web ports when no port is named', () => {
    const [exact, wild, literal] = parseAllowList(['pypi.org', '*.github.com:443', '127.0.0.1:8080']);
    const host = (t: string) => requestHost(t)!;
    expect(entryAllows(exact!, host('PYPI.ORG.'), 443)).toBe(true);
    expect(entryAllows(exact!, host('pypi.org'), 80)).toBe(true);
    expect(entryAllows(exact!, host('pypi.org'), 8080)).toBe(false);
    expect(entryAllows(exact!, host('files.pypi.org'), 443)).toBe(false);
    expect(entryAllows(wild!, host('a.b.github.com'), 443)).toBe(true);
    expect(entryAllows(wild!, host('github.com'), 443)).toBe(false);
    expect(entryAllows(wild!, host('a.github.com'), 80)).toBe(false);
    expect(entryAllows(wild!, host('evilgithub.com'), 443)).toBe(false);
    expect(entryAllows(literal!, host('127.0.0.1'), 8080)).toBe(true);
    expect(entryAllows(literal!, host('localhost'), 8080)).toBe(false);
  });

  it('permits an entry only inside the permitted set, port by port', () => {
    const permitted = parseAllowList(['*.example.com', 'pypi.org:443', 'pypi.org:80', '10.0.0.5:5432']);
    const ok = (t: string) => isPermitted(parseAllowEntry(t)!, permitted);
    expect(ok('api.example.com')).toBe(true);
    expect(ok('*.api.example.com:443')).toBe(true);
    expect(ok('*.example.com')).toBe(true);
    expect(ok('example.com')).toBe(false);
    expect(ok('api.example.com:8443')).toBe(false);
    expect(ok('pypi.org')).toBe(true);
    expect(ok('10.0.0.5:5432')).toBe(true);
    expect(ok('10.0.0.5')).toBe(false);
    expect(ok('*.com')).toBe(false);
  });

  it('expands presets and reports the first invalid item by position', () => {
    expect(expandAllowList(['@packages', 'pypi.org'])).toEqual({ entries: [...ALLOW_LIST_PRESETS['@packages']!] });
    // What apt-get in a built template fetches from: mmdebstrap's default sources.
    expect(expandAllowList(['@debian'])).toEqual({ entries: ['deb.debian.org', 'security.debian.org'] });
    expect(expandAllowList(['pypi.org', 'nope!', 'x'])).toEqual({ invalidIndex: 1 });
  });
});

describe('egress destinations', () => {
  const entries = parseAllowList(['pypi.org', 'localhost:8080', 'internal.test:8080', '127.0.0.1:9090', 'mixed.test']);
  const answers: Record<string, { address: string; family: number }[]> = {
    'pypi.org': [{ address: '151.101.0.223', family: 4 }],
    localhost: [{ address: '127.0.0.1', family: 4 }],
    'internal.test': [
      { address: '10.1.2.3', family: 4 },
      { address: 'fd00::1', family: 6 },
    ],
    'mixed.test': [
      { address: '192.168.1.1', family: 4 },
      { address: '::ffff:7f00:1', family: 6 },
      { address: '93.184.216.34', family: 4 },
    ],
  };
  const resolve: Resolver = async (host) => {
    const a = answers[host];
    if (!a) throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
    return a;
  };

  it('classifies non-public addresses, mapped IPv4 included', () => {
    for (const [a, f] of [
      ['127.0.0.1', 4],
      ['10.0.0.1', 4],
      ['172.31.255.255', 4],
      ['192.168.0.1', 4],
      ['169.254.169.254', 4],
      ['100.64.0.1', 4],
      ['0.0.0.0', 4],
      ['::1', 6],
      ['fe80::1', 6],
      ['fd12::1', 6],
      ['::ffff:a9fe:a9fe', 6],
      ['::ffff:127.0.0.1', 6],
      ['::7f00:1', 6],
      ['::127.0.0.1', 6],
      ['64:ff9b:1::a00:1', 6],
      ['2002:7f00:1::1', 6],
      ['2002:c0a8:101::1', 6],
    ] as const)
      expect(isNonPublicAddress(a, f), a).toBe(true);
    for (const [a, f] of [
      ['151.101.0.223', 4],
      ['8.8.8.8', 4],
      ['2a04:4e42::223', 6],
      ['64:ff9b::808:808', 6],
    ] as const)
      expect(isNonPublicAddress(a, f), a).toBe(false);
  });

  it('names the kind of a non-public address in the words a refusal uses', () => {
    expect(['127.0.0.5', '::1', '::ffff:127.0.0.1'].map(nonPublicKind)).toEqual(['loopback', 'loopback', 'loopback']);
    expect(['169.254.169.254', 'fe80::1'].map(nonPublicKind)).toEqual(['link-local', 'link-local']);
    expect(['10.1.2.3', '172.16.0.1', '192.168.1.1', '100.64.0.1', 'fd00::1'].map(nonPublicKind)).toEqual(Array(5).fill('private'));
    expect(['0.0.0.0', '224.0.0.1', '2001:db8::1'].map(nonPublicKind)).toEqual(['reserved', 'reserved', 'reserved']);
  });

  it('connects an allowed name to an address checked here', async () => {
    expect(await resolveDestination(entries, 'pypi.org', 443, resolve)).toEqual({ address: '151.101.0.223', family: 4 });
    // The first public answer wins over private ones.
    expect(await resolveDestination(entries, 'mixed.test', 443, resolve)).toEqual({ address: '93.184.216.34', family: 4 });
  });

  it('refuses names resolving only to non-public addresses unless an entry names the address literally', async () => {
    expect(await resolveDestination(entries, 'localhost', 8080, resolve)).toEqual({ denied: 'private_address', address: '127.0.0.1' });
    // The first address found is the one a refusal names.
    expect(await resolveDestination(entries, 'internal.test', 8080, resolve)).toEqual({ denied: 'private_address', address: '10.1.2.3' });
    expect(await resolveDestination(entries, '127.0.0.1', 9090, resolve)).toEqual({ address: '127.0.0.1', family: 4 });
    const withLiteral = parseAllowList(['localhost:9090', '127.0.0.1:9090']);
    expect(await resolveDestination(withLiteral, 'localhost', 9090, resolve)).toEqual({ address: '127.0.0.1', family: 4 });
  });

  it('refuses what is not listed, unresolvable names and malformed hosts', async () => {
    expect(await resolveDestination(entries, 'pypi.org', 8443, resolve)).toEqual({ denied: 'not_listed' });
    expect(await resolveDestination(entries, '151.101.0.223', 443, resolve)).toEqual({ denied: 'not_listed' });
    expect(await resolveDestination(entries, '127.0.0.1', 8080, resolve)).toEqual({ denied: 'not_listed' });
    expect(await resolveDestination(parseAllowList(['nowhere.test']), 'nowhere.test', 443, resolve)).toEqual({ denied: 'unresolvable' });
    expect(await resolveDestination(entries, 'bad host', 443, resolve)).toEqual({ denied: 'bad_host' });
    // A short numeric form of an address is neither a name nor a canonical address.
    expect(await resolveDestination(entries, '2130706433', 80, resolve)).toEqual({ denied: 'bad_host' });
  });
});

describe('proxy variables', () => {
  it('are set only with an allow-list, in both cases, and keep the sandbox loopback names that are not listed direct', () => {
    expect(proxyEnvironment(undefined)).toEqual({});
    expect(proxyEnvironment([])).toEqual({});
    const env = proxyEnvironment(['pypi.org']);
    expect(env).toEqual({
      HTTP_PROXY: 'http://127.0.0.1:3128',
      HTTPS_PROXY: 'http://127.0.0.1:3128',
      NO_PROXY: 'localhost,127.0.0.1,::1',
      http_proxy: 'http://127.0.0.1:3128',
      https_proxy: 'http://127.0.0.1:3128',
      no_proxy: 'localhost,127.0.0.1,::1',
    });
    expect(proxyEnvironment(['127.0.0.1:8080']).NO_PROXY).toBe('localhost,::1');
    expect(proxyEnvironment(['[::1]:80', 'localhost:80']).no_proxy).toBe('127.0.0.1');
  });
});

describe('egress failures: the log file, the keeper memory and the notes', () => {
  const at = (
    t: number,
    host: string,
    reason: EgressFailureRecord['reason'],
    extra: Partial<EgressFailureRecord> = {},
  ): EgressFailureRecord => ({
    at: t,
    host,
    port: 443,
    reason,
    ...extra,
  });

  it('records a destination at most once a minute per reason in the file, and reads back only whole new lines', () => {
    const dir = mkdtempSync(join(tmpdir(), 'failures-'));
    try {
      const log = new FailureLog(dir);
      log.record({ host: 'a.example', port: 443, reason: 'not_listed' }, 1_000);
      log.record({ host: 'a.example', port: 443, reason: 'not_listed' }, 30_000);
      log.record({ host: 'a.example', port: 80, reason: 'not_listed' }, 30_000);
      log.record({ host: 'a.example', port: 443, reason: 'unresolvable' }, 30_000);
      log.record({ host: 'a.example', port: 443, reason: 'not_listed' }, 61_001);
      const first = readFailures(dir, 0);
      expect(first.records).toEqual([
        at(1_000, 'a.example', 'not_listed'),
        at(30_000, 'a.example', 'not_listed', { port: 80 }),
        at(30_000, 'a.example', 'unresolvable'),
        at(61_001, 'a.example', 'not_listed'),
      ]);
      expect(readFailures(dir, first.next)).toEqual({ records: [], next: first.next });
      // A line still being written is left for the next read.
      writeFileSync(join(dir, 'network-denials.jsonl'), '{"at":1,"host":"c.exa', { flag: 'a' });
      expect(readFailures(dir, first.next).records).toEqual([]);
      expect(readFailures(join(dir, 'missing'), 0)).toEqual({ records: [], next: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads an older keeper's record ({at, host}) as a refusal that does not say which", () => {
    const dir = mkdtempSync(join(tmpdir(), 'failures-'));
    try {
      writeFileSync(join(dir, 'network-denials.jsonl'), '{"at":5,"host":"old.example"}\n{"at":6,"host":"x","reason":"made-up"}\n');
      expect(readFailures(dir, 0).records).toEqual([{ at: 5, host: 'old.example', port: 0, reason: 'refusal_unspecified' }]);
      expect(egressFailureNotes(failuresInFile(dir, 0))).toEqual([
        expect.stringMatching(
          /^The sandbox's egress proxy refused old\.example: not on this sandbox's allow-list, or a name that resolves/,
        ),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('remembers every failure in the keeper, one record per destination with its latest time in a window', () => {
    const memory = new FailureMemory();
    const f = { host: 'a.example', port: 443, reason: 'not_listed' as const };
    // Within a minute of each other: the file would hold only the first; the memory holds each.
    memory.record(f, 1_000);
    memory.record({ ...f, host: 'b.example' }, 1_500);
    memory.record(f, 2_000);
    expect(memory.between(1_800)).toEqual([{ ...f, at: 2_000 }]);
    expect(memory.between(0, 1_800)).toEqual([
      { ...f, at: 1_000 },
      { ...f, host: 'b.example', at: 1_500 },
    ]);
    expect(memory.between(2_001)).toEqual([]);
    // Bounded: the destinations failed longest ago go first.
    for (let i = 0; i < 300; i++) memory.record({ ...f, host: `h${i}.example` }, 3_000 + i);
    const all = memory.between(0);
    expect(all.length).toBe(256);
    expect(all.some((r) => r.host === 'a.example')).toBe(false);
    expect(all.at(-1)!.host).toBe('h299.example');
  });

  it('notes each kind of failure apart: what was refused and why, what could not be reached and what happened', () => {
    const notes = egressFailureNotes([
      at(1, 'a.example', 'not_listed'),
      at(2, '127.0.0.1', 'not_listed', { port: 8080 }),
      at(3, 'localhost', 'private_address', { port: 5432, address: '127.0.0.1' }),
      at(4, 'pypi.org', 'unresolvable'),
      at(5, '127.0.0.1', 'connection_refused', { port: 9 }),
      at(6, 'slow.example', 'timeout'),
    ]);
    expect(notes).toHaveLength(3);
    expect(notes[0]).toMatch(/^The sandbox's egress proxy refused a\.example:443, 127\.0\.0\.1:8080: not on this sandbox's allow-list /);
    expect(notes[0]).toContain('network.allow_out');
    expect(notes[1]).toMatch(/^The sandbox's egress proxy refused localhost:5432 \(it resolved to 127\.0\.0\.1, a loopback address\): /);
    expect(notes[1]).toContain('network.allow_out names 127.0.0.1:5432');
    expect(notes[2]).toBe(
      "The sandbox's egress proxy could not reach pypi.org:443 (the name does not resolve on the host), 127.0.0.1:9 (connection refused), " +
        'slow.example:443 (no connection or answer in time), which the allow-list allows: it answered 502 Bad Gateway (504 on a timeout), ' +
        'which HTTPS clients report as "CONNECT tunnel failed, response 502". The allow-list is not what failed: the name, the service, or the network beyond this machine is.',
    );
    expect(egressFailureNotes([])).toEqual([]);
  });

  it('names at most five destinations per note and counts the rest, never naming a host recorded with "?"', () => {
    const many = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((h, i) => at(i, `${h}.example`, 'not_listed'));
    const [note] = egressFailureNotes(many);
    expect(note).toContain('refused a.example:443, b.example:443, c.example:443, d.example:443, e.example:443 and 2 more: ');
    expect(note).not.toContain('f.example');
    // A name recorded with `?` for characters a host name cannot have is counted, never shown.
    expect(egressFailureNotes([at(1, 's3cr?t.example', 'not_listed'), at(2, 'ok.example', 'not_listed')])[0]).toContain(
      'refused ok.example:443 and 1 more: ',
    );
    expect(egressFailureNotes([at(1, 's3cr?t.example', 'unresolvable')])[0]).toContain('could not reach a host, ');
    expect(egressFailureNotes([at(1, 'x?.example', 'not_listed'), at(2, 'y?.example', 'not_listed')])[0]).toContain('refused 2 hosts: ');
    const hidden = egressFailureNotes([at(1, 'x?.example', 'private_address', { address: '10.0.0.1' })])[0]!;
    expect(hidden.includes('?.example')).toBe(false);
  });
});

describe('server configuration and the network argument', () => {
  const configWith = (env: Record<string, string>, flags = {}): ServerConfig => loadConfig(env, flags);

  it('reads the permitted set and the default from flags or environment', () => {
    expect(configWith({}).network).toEqual({ permitted: [], default: 'provider' });
    expect(
      configWith({ SANDBOX_MCP_NETWORK_ALLOW: ' PyPI.org , 127.0.0.1:8080 ', SANDBOX_MCP_NETWORK_DEFAULT: 'allowed' }).network,
    ).toEqual({
      permitted: ['pypi.org', '127.0.0.1:8080'],
      default: 'allowed',
    });
    const flags = configWith({ SANDBOX_MCP_NETWORK_ALLOW: 'pypi.org' }, { networkAllow: ['@packages', 'x.test'], networkDefault: 'none' });
    expect(flags.network?.permitted).toContain('registry.npmjs.org');
    expect(flags.network?.permitted).toContain('x.test');
    expect(flags.network?.permitted).not.toContain('pypi.org:443');
    expect(flags.network?.default).toBe('none');
  });

  it('refuses a bad entry or default naming the setting, never echoing the value', () => {
    const secretish = 'bad entry with spaces';
    expect(() => configWith({ SANDBOX_MCP_NETWORK_ALLOW: `pypi.org,${secretish}` })).toThrow(ConfigError);
    try {
      configWith({ SANDBOX_MCP_NETWORK_ALLOW: `pypi.org,${secretish}` });
    } catch (e) {
      expect((e as Error).message).toMatch(/^SANDBOX_MCP_NETWORK_ALLOW: item 2 /);
      expect((e as Error).message).not.toContain(secretish);
    }
    expect(() => configWith({}, { networkAllow: ['ok.test', '::1'] })).toThrow(/^--network-allow: item 2/);
    expect(() => configWith({ SANDBOX_MCP_NETWORK_DEFAULT: 'everything' })).toThrow(/^SANDBOX_MCP_NETWORK_DEFAULT must be one of/);
  });

  it('turns create_sandbox.network into a policy within the permitted set, else the default', () => {
    const config = configWith({ SANDBOX_MCP_NETWORK_ALLOW: '*.example.com,127.0.0.1:8080' });
    expect(resolveNetworkArg(undefined, config)).toBeUndefined();
    expect(resolveNetworkArg('none', config)).toEqual({ allowOut: [] });
    expect(resolveNetworkArg({ allow_out: ['API.example.com', 'api.example.com:443', '127.0.0.1:8080'] }, config)).toEqual({
      allowOut: ['api.example.com', 'api.example.com:443', '127.0.0.1:8080'],
    });
    let error: unknown;
    try {
      resolveNetworkArg({ allow_out: ['api.example.com', 'localhost:8080'] }, config);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ category: 'invalid_argument', code: 'network_not_permitted' });
    expect((error as Error).message).toContain('`network.allow_out.1`');
    expect((error as Error).message).not.toContain('localhost');
    expect(resolveNetworkArg(undefined, configWith({ SANDBOX_MCP_NETWORK_DEFAULT: 'none' }))).toEqual({ allowOut: [] });
    expect(resolveNetworkArg(undefined, { ...config, network: { ...config.network!, default: 'allowed' } })).toEqual({
      allowOut: ['*.example.com', '127.0.0.1:8080'],
    });
  });

  it('tells the model what network its sandboxes have', () => {
    expect(networkSummary(configWith({}))).toMatch(/no network at all[\s\S]*permits no egress/);
    const text = networkSummary(configWith({ SANDBOX_MCP_NETWORK_ALLOW: '@packages' }));
    expect(text).toContain('pypi.org, files.pythonhosted.org');
    expect(text).toContain('HTTP_PROXY');
    expect(text).toContain('expose_port');
    expect(networkSummary(configWith({ SANDBOX_MCP_LOCAL_NETWORK: 'host' }))).toContain("shares this machine's network");
  });
});

describe("the doctor's network line", () => {
  it('says what a create without network gets and what may be allowed; warns when sandboxes share the host network', () => {
    expect(checkNetwork(loadConfig({}))).toMatchObject({ name: 'network', status: 'ok', message: expect.stringContaining('no network') });
    expect(
      checkNetwork(loadConfig({ SANDBOX_MCP_NETWORK_ALLOW: 'pypi.org,x.test', SANDBOX_MCP_NETWORK_DEFAULT: 'allowed' })),
    ).toMatchObject({
      status: 'ok',
      message: expect.stringMatching(/whole permitted set; create_sandbox may allow 2 entries/),
    });
    expect(checkNetwork(loadConfig({ SANDBOX_MCP_LOCAL_NETWORK: 'host' }))).toMatchObject({
      status: 'warn',
      fix: expect.stringContaining('--network-allow'),
    });
  });
});

describe("e2b's network options", () => {
  it('map none to no internet access, a list to allowOut with all else denied, and refuse ports', () => {
    expect(createNetworkOpts(undefined)).toEqual({});
    expect(createNetworkOpts({ allowOut: [] })).toEqual({ allowInternetAccess: false });
    expect(createNetworkOpts({ allowOut: ['pypi.org', '*.github.com', '[2001:db8::1]', '8.8.8.8'] })).toEqual({
      network: { allowOut: ['pypi.org', '*.github.com', '2001:db8::1', '8.8.8.8'], denyOut: ['0.0.0.0/0'] },
    });
    expect(() => createNetworkOpts({ allowOut: ['pypi.org:443'] })).toThrow(expect.objectContaining({ category: 'unsupported' }));
  });
});
