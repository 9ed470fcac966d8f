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
import { DenialLog, readDenials } from '../../host/providers/local/network/denial-log.js';
import { egressRefusalNote, egressRefusalNotes, hostsRefusedSince } from '../../host/providers/local/network/denial-notes.js';
import { isNonPublicAddress, resolveDestination, type Resolver } from '../../host/providers/local/network/destinations.js';
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

  it('connects an allowed name to an address checked here', async () => {
    expect(await resolveDestination(entries, 'pypi.org', 443, resolve)).toEqual({ address: '151.101.0.223', family: 4 });
    // The first public answer wins over private ones.
    expect(await resolveDestination(entries, 'mixed.test', 443, resolve)).toEqual({ address: '93.184.216.34', family: 4 });
  });

  it('refuses names resolving only to non-public addresses unless an entry names the address literally', async () => {
    expect(await resolveDestination(entries, 'localhost', 8080, resolve)).toEqual({ denied: 'private_address' });
    expect(await resolveDestination(entries, 'internal.test', 8080, resolve)).toEqual({ denied: 'private_address' });
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

describe('denial log', () => {
  it('records each host at most once a minute and reads back only whole new lines', () => {
    const dir = mkdtempSync(join(tmpdir(), 'denials-'));
    try {
      const log = new DenialLog(dir);
      log.record('a.example', 1_000);
      log.record('a.example', 30_000);
      log.record('b.example', 30_000);
      log.record('a.example', 61_001);
      const first = readDenials(dir, 0);
      expect(first.records).toEqual([
        { at: 1_000, host: 'a.example' },
        { at: 30_000, host: 'b.example' },
        { at: 61_001, host: 'a.example' },
      ]);
      expect(readDenials(dir, first.next)).toEqual({ records: [], next: first.next });
      // A line still being written is left for the next read.
      writeFileSync(join(dir, 'network-denials.jsonl'), '{"at":1,"host":"c.exa', { flag: 'a' });
      expect(readDenials(dir, first.next).records).toEqual([]);
      expect(readDenials(join(dir, 'missing'), 0)).toEqual({ records: [], next: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('notes the distinct hosts refused within a window, naming at most five and counting the rest', () => {
    const dir = mkdtempSync(join(tmpdir(), 'denials-'));
    try {
      const log = new DenialLog(dir);
      log.record('before.example', 999);
      for (const [i, host] of ['a', 'b', 'c', 'd', 'e', 'f', 'g'].entries()) log.record(`${host}.example`, 1_000 + i);
      log.record('after.example', 2_000);
      expect(hostsRefusedSince(dir, 1_000, 2_000)).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((h) => `${h}.example`));
      expect(hostsRefusedSince(dir, 1_006)).toEqual(['g.example', 'after.example']);
      expect(egressRefusalNotes(dir, 2_001)).toEqual([]);
      expect(egressRefusalNotes(join(dir, 'missing'), 0)).toEqual([]);
      const [note] = egressRefusalNotes(dir, 1_000, 2_000);
      expect(note).toContain("The sandbox's egress proxy refused a.example, b.example, c.example, d.example, e.example and 2 more: ");
      expect(note).toContain('network.allow_out');
      expect(note).not.toContain('f.example');
      // A name recorded with `?` for characters a host name cannot have is counted, never shown.
      expect(egressRefusalNote(['s3cr?t.example', 'ok.example'])).toContain('refused ok.example and 1 more: ');
      expect(egressRefusalNote(['s3cr?t.example'])).toContain('refused a host: ');
      expect(egressRefusalNote(['x?.example', 'y?.example'])).toContain('refused 2 hosts: ');
      expect(egressRefusalNote(['x?.example', 'y?.example']).includes('?.example')).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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
