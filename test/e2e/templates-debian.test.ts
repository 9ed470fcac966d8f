// The one slow template test: `sandbox-mcp template build` makes a real minimal Debian root with
// mmdebstrap, run on a real pseudo-terminal (its progress display: a spinner line with the
// phase), then apt-get installs a package inside a sandbox on that template through an egress
// allow-list, the way a person would set it up (--network-allow @debian). Before that, a build
// that fails and one interrupted with Ctrl-C leave nothing behind (store and processes).
//
// The packages mmdebstrap downloads are kept between runs on the same machine (the build's
// --package-cache, in the user's cache directory, outside the checkout); a fresh machine
// downloads them. The build names one mirror (--mirror http://deb.debian.org/debian, its main
// only): this machine's Debian mirror lags its clock by weeks, so the updates and security suites
// a stable build adds by default answer "Release file … is expired".
import { spawn as spawnPty } from '@lydell/node-pty';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { lookup } from 'node:dns/promises';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isNonPublicAddress } from '../../host/providers/local/network/destinations.js';
import { ALLOW_LIST_PRESETS } from '../../host/providers/network-policy.js';
import { layerRoot, readTemplate, templatesDir } from '../../host/providers/local/templates/store.js';
import { connectStdio, ok, serverEnv, type StdioServer } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { isRootOrSkipping, requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

const stateDir = tempStateDir();
const PACKAGE_CACHE = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'sandbox-mcp-tests', 'debian-packages');
const MIRROR = 'http://deb.debian.org/debian';
const BUILD_TIMEOUT_MS = 600_000;
let server: StdioServer | undefined;

/**
 * Runs `template build` on a pseudo-terminal; resolves its exit status and everything it showed.
 * `interruptAt`: once the output matches it, Ctrl-C is typed.
 */
function buildOnTerminal(name: string, extra: string[] = [], interruptAt?: RegExp): Promise<{ code: number; output: string }> {
  const args = [HOST_JS, 'template', 'build', name, '--mirror', MIRROR, '--package-cache', PACKAGE_CACHE, ...extra];
  const term = spawnPty(process.execPath, args, {
    cols: 120,
    rows: 30,
    env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, TERM: 'xterm' }),
  });
  let output = '';
  let isInterrupted = false;
  term.onData((d) => {
    output += d;
    if (interruptAt && !isInterrupted && interruptAt.test(output)) {
      isInterrupted = true;
      term.write('\x03');
    }
  });
  return new Promise((resolve) => term.onExit(({ exitCode }) => resolve({ code: exitCode, output })));
}

/** What a failed or interrupted build must not leave: anything in the store but records and layers, and its processes. */
function leftovers(): string[] {
  const store = templatesDir(stateDir);
  const names = (d: string) => (existsSync(d) ? readdirSync(d) : []);
  const processes = readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(join(store, 'layers'));
      } catch {
        return false;
      }
    });
  return [
    ...names(store).filter((n) => n.startsWith('.tmp-')),
    ...names(join(store, 'layers')).filter((n) => !/^[0-9a-f]{16}$/.test(n)),
    ...names(join(store, '.claims')),
    ...processes.map((p) => `process ${p}`),
  ];
}

/** A call that may take minutes (apt-get): the client's own 60 s request timeout would cut it. */
async function runLong(client: Client, sandboxId: string, command: string): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  const r = (await client.callTool({ name: 'run_command', arguments: { sandbox_id: sandboxId, command, timeout: 900 } }, undefined, {
    timeout: 900_000,
  })) as CallToolResult;
  if (r.isError) throw new Error(`run_command failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent as { exit_code: number; stdout: string; stderr: string };
}

const isRoot = isRootOrSkipping('building a template with mmdebstrap');

beforeAll(() => {
  requireSandboxes();
  requireCommands(['mmdebstrap']);
});

afterAll(async () => {
  await server?.close();
  await destroyStateDir(stateDir);
});

describe.runIf(isRoot)('a Debian template built with mmdebstrap', () => {
  it(
    'leaves nothing when a build fails or is interrupted; builds on a terminal showing its phase; apt-get installs a package inside a sandbox through an allow-list',
    async () => {
      const failed = await buildOnTerminal('broken', ['--suite', 'no-such-suite']);
      expect(failed.code).toBe(1);
      expect(failed.output).toContain('building template broken: the last lines mmdebstrap printed:');
      expect(failed.output).toContain('unavailable: mmdebstrap failed (its last lines are above)');
      expect(readTemplate(templatesDir(stateDir), 'broken')).toBeUndefined();
      expect(leftovers()).toEqual([]);
      // Interrupted while apt and dpkg work in the tree: their processes are stopped, then the tree removed.
      const interrupted = await buildOnTerminal('stopped', [], /extracting archives|installing essential packages/);
      expect(interrupted.code).toBe(130);
      expect(interrupted.output).toContain('The build was interrupted; nothing of it was kept.');
      // Stopped there, not left to finish.
      expect(interrupted.output).not.toMatch(/cleaning package lists|success in/);
      expect(readTemplate(templatesDir(stateDir), 'stopped')).toBeUndefined();
      expect(leftovers()).toEqual([]);

      // With one small package of its own (--packages; figlet needs only libc).
      const built = await buildOnTerminal('debian', ['--packages', 'figlet']);
      expect(built.code, built.output.slice(-3000)).toBe(0);
      // The progress line, rewritten in place (carriage return, erase line): a spinner, the phase, the time so far.
      const rewrites = built.output.split('\r\x1b[K');
      expect(rewrites.some((l) => /^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] building template debian: running apt-get update \(\d+:\d\d\)/.test(l))).toBe(true);
      expect(rewrites.some((l) => /^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] building template debian: installing essential packages \(\d+:\d\d\)/.test(l))).toBe(true);
      expect(built.output).toMatch(/built template debian: debian stable \+ figlet, [\d.]+ MiB in \d+ s/);
      expect(existsSync(PACKAGE_CACHE)).toBe(true);

      const store = templatesDir(stateDir);
      const record = readTemplate(store, 'debian')!;
      expect(record).toMatchObject({
        source: { kind: 'debian', suite: 'stable', packages: ['figlet'], variant: 'apt' },
        owners: 'native',
        env: { DEBIAN_FRONTEND: 'noninteractive' },
      });
      const layer = layerRoot(store, record.layers[0]!);
      for (const f of ['usr/bin/apt-get', 'var/lib/dpkg/info/figlet.list']) expect(existsSync(join(layer, f)), f).toBe(true);
      // The host's resolver settings and name were not copied in; no package was left in the tree.
      for (const f of ['etc/resolv.conf', 'etc/hostname', 'usr/bin/hello']) expect(existsSync(join(layer, f)), f).toBe(false);

      // What a person allows: Debian's hosts. Here deb.debian.org resolves to an address the proxy
      // treats as non-public (a documentation range), which an entry must then name literally.
      const { address } = await lookup('deb.debian.org', { family: 4 });
      const allow = [...ALLOW_LIST_PRESETS['@debian']!, ...(isNonPublicAddress(address, 4) ? [`${address}:80`] : [])];
      server = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir }, ['--network-allow', ['@debian', ...allow.slice(2)].join(',')]);
      const sb = await ok(server.client, 'create_sandbox', { template: 'debian', timeout: 900, network: { allow_out: allow } });
      // The template gives its commands DEBIAN_FRONTEND=noninteractive: apt-get needs no prefix and debconf prints no noise.
      const apt = await runLong(
        server.client,
        sb.sandbox_id,
        'echo "frontend=$DEBIAN_FRONTEND"; apt-get update -q && apt-get install -y -q hello && hello && dpkg-query -W -f=\'${Status}\\n\' hello',
      );
      expect(apt.exit_code, `${apt.stdout.slice(-2000)}\n${apt.stderr.slice(-2000)}`).toBe(0);
      expect(apt.stdout).toContain('frontend=noninteractive\n');
      expect(apt.stdout).toContain('Hello, world!\ninstall ok installed\n');
      expect(apt.stdout + apt.stderr).not.toContain('debconf: unable to initialize frontend');
      // It went into the sandbox's writable layer: the template is unchanged.
      expect(existsSync(join(layer, 'usr/bin/hello'))).toBe(false);

      // A snapshot leaves apt's downloaded lists and .deb archives out unless asked; both keep the template's DEBIAN_FRONTEND.
      const downloaded = (root: string) => [
        ...readdirSync(join(root, 'var/lib/apt/lists')).filter((n) => n.endsWith('_Packages') || n.endsWith('Release')),
        ...readdirSync(join(root, 'var/cache/apt/archives')).filter((n) => n.endsWith('.deb')),
      ];
      expect(
        await server.client.callTool({
          name: 'snapshot_sandbox',
          arguments: { sandbox_id: sb.sandbox_id, name: 'x', keep_apt_cache: 'yes' },
        }),
      ).toMatchObject({ isError: true, content: [{ text: expect.stringContaining('keep_apt_cache') }] });
      await ok(server.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'lean' });
      await ok(server.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'cached', keep_apt_cache: true });
      const lean = readTemplate(store, 'lean')!;
      const cached = readTemplate(store, 'cached')!;
      expect(downloaded(layerRoot(store, lean.layers[0]!))).toEqual([]);
      expect(downloaded(layerRoot(store, cached.layers[0]!)).some((n) => n.startsWith('hello_'))).toBe(true);
      expect(existsSync(join(layerRoot(store, lean.layers[0]!), 'usr/bin/hello'))).toBe(true);
      expect([lean.env, cached.env]).toEqual([{ DEBIAN_FRONTEND: 'noninteractive' }, { DEBIAN_FRONTEND: 'noninteractive' }]);
      const fromLean = await ok(server.client, 'create_sandbox', { template: 'lean', timeout: 120 });
      const seen = await ok(server.client, 'run_command', { sandbox_id: fromLean.sandbox_id, command: 'echo "$DEBIAN_FRONTEND"; hello' });
      expect(seen.stdout).toBe('noninteractive\nHello, world!\n');
    },
    BUILD_TIMEOUT_MS + 300_000,
  );
});
