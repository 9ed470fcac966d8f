// The package as a user gets it: packed from a fresh checkout (its `prepare` builds dist/),
// installed globally from the tarball into a temporary prefix, and driven from a directory outside
// the repository by the SDK's Client over stdio. The README's client snippets are checked against
// the same installed package: every command they name exists there.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFile } from 'node:child_process';
import {
  accessSync,
  constants as fsConstants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ok } from '../support/built-server.js';
import { REPO } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const work = mkdtempSync(join(tmpdir(), 'sandbox-mcp-install-'));
const checkout = join(work, 'checkout');
const prefix = join(work, 'prefix');
const elsewhere = join(work, 'elsewhere');
const stateDir = join(work, 'state');
const packageDir = join(prefix, 'lib', 'node_modules', 'sandbox-mcp');
const bin = join(prefix, 'bin', 'sandbox-mcp');
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { name: string; version: string };
let packed: string[] = [];
let tarball = '';

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${cmd} ${args.join(' ')} failed: ${stderr.slice(-2000)}`));
      else resolve({ stdout, stderr });
    });
  });
}

/** The environment a client gives the server: node's directory on PATH (for the bin's shebang), nothing from npm. */
function clientEnv(): Record<string, string> {
  return { PATH: `${dirname(process.execPath)}:/usr/bin:/bin`, HOME: process.env.HOME ?? '/root', SANDBOX_MCP_STATE_DIR: stateDir };
}

/**
 * A fresh checkout at `dir`: the sources without dist/ or node_modules/ (whose dev dependencies,
 * esbuild among them, `prepare` needs: linked from the repository rather than installed again).
 */
function freshCheckout(dir: string): void {
  cpSync(REPO, dir, {
    recursive: true,
    filter: (src) => !['node_modules', 'dist', '.git', 'coverage'].includes(basename(src)) && !src.endsWith('.tgz'),
  });
  symlinkSync(join(REPO, 'node_modules'), join(dir, 'node_modules'));
}

beforeAll(async () => {
  requireSandboxes();
  freshCheckout(checkout);
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work], checkout);
  const [info] = JSON.parse(stdout) as { filename: string; files: { path: string }[] }[];
  packed = info!.files.map((f) => f.path);
  tarball = info!.filename;
  // From npm's cache when it holds the dependencies (CI's `npm ci` just filled it), else the registry.
  await run(
    'npm',
    ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(work, info!.filename)],
    work,
  );
  mkdirSync(elsewhere);
}, 300_000);

afterAll(async () => {
  if (existsSync(stateDir)) await destroyStateDir(stateDir);
  rmSync(work, { recursive: true, force: true });
});

describe('the installed package', () => {
  it('packs every built artefact, the licence and the README, and no sources', () => {
    for (const file of [
      'dist/host.js',
      'dist/keeper.cjs',
      'dist/agent.cjs',
      'dist/agent-manifest.json',
      'LICENSE',
      'README.md',
      'package.json',
    ]) {
      expect(packed).toContain(file);
    }
    // The CLI (host/cli/run.ts) is its own chunk, loaded by the tiny entry.
    expect(packed.filter((f) => /^dist\/chunks\/run-.*\.js$/.test(f))).toHaveLength(1);
    expect(packed.filter((f) => f.endsWith('.ts'))).toEqual([]);
    expect(packed.every((f) => f.startsWith('dist/') || ['LICENSE', 'README.md', 'package.json'].includes(f))).toBe(true);
  });

  it("leaves git nothing to track after `npm pack` in a clone: the tarball's name is ignored", async () => {
    expect(tarball).toBe(`${pkg.name}-${pkg.version}.tgz`);
    // Exit 0 (and the name printed) only for an ignored path; --no-index: whether or not one exists.
    const { stdout } = await run('git', ['check-ignore', '--no-index', tarball], REPO);
    expect(stdout).toBe(`${tarball}\n`);
  });

  it('puts an executable sandbox-mcp on the prefix`s PATH that knows its version', async () => {
    accessSync(bin, fsConstants.X_OK);
    const { stdout } = await run(bin, ['--version'], elsewhere, clientEnv());
    expect(stdout).toBe(`${pkg.version}\n`);
  });

  it('installs from the checkout too (`npm install -g .`: a link whose `prepare` builds it)', async () => {
    // A checkout of its own, never packed: its dist/ can only come from this install's `prepare`.
    const linked = join(work, 'linked-checkout');
    freshCheckout(linked);
    expect(existsSync(join(linked, 'dist'))).toBe(false);
    const linkPrefix = join(work, 'link-prefix');
    await run('npm', ['install', '-g', '--prefix', linkPrefix, '--no-audit', '--no-fund', '--loglevel=error', '.'], linked);
    for (const file of ['dist/host.js', 'dist/keeper.cjs', 'dist/agent.cjs']) expect(existsSync(join(linked, file)), file).toBe(true);
    const linkBin = join(linkPrefix, 'bin', 'sandbox-mcp');
    expect(realpathSync(linkBin)).toBe(join(realpathSync(linked), 'dist', 'host.js'));
    const { stdout } = await run(linkBin, ['--version'], elsewhere, clientEnv());
    expect(stdout).toBe(`${pkg.version}\n`);
  });

  it('serves a stdio session from outside the repository: create, run, task, kill', async () => {
    const transport = new StdioClientTransport({ command: bin, args: [], cwd: elsewhere, env: clientEnv(), stderr: 'pipe' });
    const client = new Client({ name: 'install-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const sandbox = await ok(client, 'create_sandbox', { timeout: 120 });
      expect(sandbox.sandbox_id).toMatch(/^local:[a-z0-9]{12}$/);
      // The keeper the provider started is the installed one, found beside the installed bundle.
      const id = sandbox.sandbox_id.slice('local:'.length);
      const keeperPid = (JSON.parse(readFileSync(join(stateDir, 'local', id, 'keeper.json'), 'utf8')) as { keeper: { pid: number } }).keeper
        .pid;
      expect(readFileSync(`/proc/${keeperPid}/cmdline`, 'utf8').split('\0')).toContain(join(packageDir, 'dist', 'keeper.cjs'));

      expect(await ok(client, 'run_command', { command: 'echo installed' })).toMatchObject({ exit_code: 0, stdout: 'installed\n' });
      const task = await ok(client, 'start_task', { command: 'echo from-task' });
      let view = task;
      await waitFor(async () => {
        view = await ok(client, 'get_task', { sandbox_id: sandbox.sandbox_id, task_id: task.task_id, wait: 10 });
        return view.state !== 'running';
      }, 'the task to finish');
      expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'from-task\n' });
      expect(await ok(client, 'kill_sandbox', {})).toEqual({ success: true, sandbox_id: sandbox.sandbox_id, destroyed: true });
    } finally {
      await client.close();
    }
  });
});

/** The server entries of one client configuration: `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code). */
function serverEntries(config: Record<string, unknown>): { key: string; entry: Record<string, unknown> }[] {
  const entries: { key: string; entry: Record<string, unknown> }[] = [];
  for (const key of ['mcpServers', 'servers']) {
    for (const entry of Object.values((config[key] ?? {}) as Record<string, Record<string, unknown>>)) entries.push({ key, entry });
  }
  return entries;
}

/** Checks that a stdio command line a snippet names runs something the installed package has. */
function expectInstalledCommand(command: string, args: readonly string[]): void {
  if (command === 'sandbox-mcp') return accessSync(bin, fsConstants.X_OK);
  const script = command === 'node' ? args[0] : command;
  // An absolute path to the built entry of a clone or an install: the package has that file.
  expect(script, `command ${command}`).toMatch(/^\/.*\/dist\/host\.js$/);
  accessSync(join(packageDir, 'dist', 'host.js'), fsConstants.X_OK);
}

describe("the README's client set-up", () => {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const blocks = (lang: string) => [...readme.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);

  it('names the tarball `npm pack` writes (docs/install.md, where the README sends the reader)', () => {
    expect(readme).toContain('(docs/install.md)');
    expect(readFileSync(join(REPO, 'docs', 'install.md'), 'utf8')).toContain(`npm install -g ./${tarball}`);
  });

  it('never names an unpublished npx package', () => {
    expect(readme).not.toMatch(/npx\s+sandbox-mcp/);
    expect(readme).not.toMatch(/"command":\s*"(npx|npm)"/);
  });

  it('has JSON snippets that parse, each naming a command the installed package has, or the /mcp URL with a bearer header', () => {
    const configs = blocks('json').map((text) => JSON.parse(text) as Record<string, unknown>);
    const entries = configs.flatMap(serverEntries);
    expect(entries.length).toBeGreaterThanOrEqual(4);
    expect(entries.some((e) => e.key === 'servers')).toBe(true);
    for (const { key, entry } of entries) {
      if (key === 'servers') expect(['stdio', 'http']).toContain(entry.type);
      if (typeof entry.command === 'string') {
        expectInstalledCommand(entry.command, (entry.args ?? []) as string[]);
      } else {
        expect(entry.url).toMatch(/^http:\/\/127\.0\.0\.1:8765\/mcp$/);
        expect((entry.headers as Record<string, string>).Authorization).toMatch(/^Bearer \S+/);
      }
    }
  });

  it('has `claude mcp add` lines for stdio and HTTP, and an Inspector line, that run installed commands', () => {
    const lines = blocks('sh')
      .flatMap((b) => b.split('\n'))
      .map((l) => l.trim());
    const adds = lines.filter((l) => l.startsWith('claude mcp add'));
    expect(adds.length).toBeGreaterThanOrEqual(2);
    for (const line of adds) {
      if (line.includes('--transport http')) {
        expect(line).toMatch(/ http:\/\/127\.0\.0\.1:8765\/mcp/);
        expect(line).toMatch(/--header "Authorization: Bearer /);
      } else {
        const [command, ...args] = line.split(' -- ')[1]!.split(/\s+/);
        expectInstalledCommand(command!, args);
      }
    }
    const inspector = lines.filter((l) => l.includes('@modelcontextprotocol/inspector'));
    expect(inspector.length).toBeGreaterThanOrEqual(1);
    for (const line of inspector) {
      const after = line.split('@modelcontextprotocol/inspector')[1]!.trim().split(/\s+/);
      // The Inspector's own options come first (`--cli`, `-e NAME=VALUE`); then the server's command.
      const command = after.find((w) => !w.startsWith('-') && !w.includes('='));
      expectInstalledCommand(command!, []);
    }
  });
});
