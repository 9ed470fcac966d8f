// `sandbox-mcp template import|ls|inspect|rm` through the BUILT bin, on roots made in the test (a
// tarball and a directory of a few host programs and their libraries): what each prints, the
// store it leaves on disk (one layer, a record of source, size and time), refusals that name
// their field and change nothing, nothing half-made after a failure, and stale work of dead
// processes cleaned by the next change. A server that is not root gets flattened owners and is
// refused `build` with what to do instead.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TemplateEntrySchema, TemplateListingSchema } from '../../host/cli/template.js';
import { identify } from '../../host/providers/local/system/proc.js';
import { layerRoot, readTemplate, templatesDir } from '../../host/providers/local/templates/store.js';
import { FLATTENED_APT_CONF } from '../../host/providers/local/templates/import-root.js';
import { serverEnv } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { isRootOrSkipping, requireBuild } from '../support/prerequisites.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { makeMiniRootDir, makeMiniRootTar } from '../support/mini-root.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { scratchDir } from '../support/scratch.js';

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const NOBODY = { uid: 65534, gid: 65534 };

function cli(args: string[], env: Record<string, string>, as?: { uid: number; gid: number }): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [as ? hostJsReadableBy(as) : HOST_JS, ...args],
      { env: serverEnv(env), ...(as ? { ...as, cwd: '/' } : {}) },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const stateDir = tempStateDir();
const env = { SANDBOX_MCP_STATE_DIR: stateDir };
const store = templatesDir(stateDir);
let tarball: string;
let rootDir: string;

/** Everything in the store but its records and layers: what a failure must not leave. */
function leftovers(dir = store): string[] {
  const names = (d: string) => (existsSync(d) ? readdirSync(d) : []);
  return [
    ...names(dir).filter((n) => !/^[a-z0-9][a-z0-9._-]*\.json$/.test(n) && n !== 'layers' && n !== '.claims'),
    ...names(join(dir, 'layers')).filter((n) => !/^[0-9a-f]{16}$/.test(n)),
    ...names(join(dir, '.claims')),
  ];
}

function listing(stdout: string) {
  return TemplateListingSchema.parse(JSON.parse(stdout)).templates;
}

beforeAll(() => {
  requireBuild();
  tarball = makeMiniRootTar();
  rootDir = makeMiniRootDir();
});

afterAll(async () => {
  await destroyStateDir(stateDir);
  rmSync(tarball, { force: true });
  rmSync(rootDir, { recursive: true, force: true });
});

describe('template import, ls, inspect, rm', () => {
  it('imports a tar archive as a one-layer template that records its source, size and time', async () => {
    const before = Date.now();
    const r = await cli(['template', 'import', 'mini', tarball], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^imported template mini: import of mini-root-\w+\.tar, [\d.]+ (KiB|MiB)\n$/);

    const ls = await cli(['template', 'ls', '--json'], env);
    expect(ls.code).toBe(0);
    const [t] = listing(ls.stdout);
    expect(t).toMatchObject({ name: 'mini', source: { kind: 'import', format: 'tar' }, used_by: [] });
    expect(t!.layers).toHaveLength(1);
    expect(Date.parse(t!.created_at)).toBeGreaterThanOrEqual(before - 1000);
    expect(Date.parse(t!.created_at)).toBeLessThanOrEqual(Date.now());
    // The size is the files' (bash and its libraries alone are more than 1 MiB).
    expect(t!.size_bytes).toBeGreaterThan(1024 * 1024);
    expect(t!.owners).toBe(process.getuid?.() === 0 ? 'native' : 'flattened');

    const root = layerRoot(store, t!.layers[0]!);
    expect(readFileSync(join(root, 'etc/mini-root'), 'utf8')).toContain('mini-root');
    expect(statSync(join(root, 'usr/bin/bash')).mode & 0o111).not.toBe(0);
    // The store is the server user's alone: layers hold the templates' setuid files.
    expect(statSync(store).mode & 0o777).toBe(0o700);
    expect(leftovers()).toEqual([]);
  });

  it('prints the templates for people, and one template as JSON', async () => {
    const ls = await cli(['template', 'ls'], env);
    expect(ls.code).toBe(0);
    expect(ls.stdout.split('\n')[0]).toMatch(/^NAME\s+SOURCE\s+SIZE\s+CREATED\s+SANDBOXES$/);
    expect(ls.stdout).toMatch(/^mini\s+import of mini-root-\w+\.tar\s+[\d.]+ (KiB|MiB)\s+\d+s ago\s+-$/m);

    const inspect = await cli(['template', 'inspect', 'mini'], env);
    expect(inspect.code).toBe(0);
    const record = TemplateEntrySchema.parse(JSON.parse(inspect.stdout));
    expect(record).toEqual({ ...readTemplate(store, 'mini'), used_by: [] });
  });

  it('imports a directory, and keeps an existing name rather than replacing it', async () => {
    const r = await cli(['template', 'import', 'from-dir', rootDir], env);
    expect(r.code, r.stderr).toBe(0);
    expect(readTemplate(store, 'from-dir')?.source).toEqual({ kind: 'import', from: rootDir.split('/').pop(), format: 'directory' });
    expect(existsSync(join(layerRoot(store, readTemplate(store, 'from-dir')!.layers[0]!), 'usr/bin/sh'))).toBe(true);

    const again = await cli(['template', 'import', 'mini', rootDir], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('conflict: A template of that name already exists');
    expect(readTemplate(store, 'mini')?.source).toMatchObject({ format: 'tar' });
    expect(leftovers()).toEqual([]);
  });

  it('refuses bad names, naming NAME and never echoing the value, and changes nothing', async () => {
    const layersBefore = readdirSync(join(store, 'layers')).sort();
    // Each a process of its own, started together (they only parse and refuse).
    const bads = ['Bad', 'base', '../up', 'x.json', '_lead', 'a b', 'a'.repeat(64)];
    const refusedImports = await Promise.all(bads.map((bad) => cli(['template', 'import', bad, tarball], env)));
    refusedImports.forEach((r, i) => {
      expect(r.code, bads[i]).toBe(2);
      expect(r.stderr).toContain("NAME must be lowercase letters, digits, '.', '_' and '-'");
      if (bads[i] !== 'base') expect(r.stderr).not.toContain(bads[i]);
    });
    for (const r of await Promise.all(['inspect', 'rm', 'build'].map((sub) => cli(['template', sub, 'Nope'], env)))) {
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('NAME must be');
    }
    expect(readdirSync(join(store, 'layers')).sort()).toEqual(layersBefore);
  });

  it('refuses subcommands it does not know, wrong arities and flags of other subcommands', async () => {
    const [none, unknown, arity, otherFlag, badPackage, serverFlag] = await Promise.all(
      [
        ['template'],
        ['template', 'frobnicate'],
        ['template', 'import', 'x'],
        ['template', 'ls', '--packages', 'git'],
        ['template', 'build', 'x', '--packages', 'Not_A_Package'],
        ['template', 'ls', '--port', '1'],
      ].map((args) => cli(args, env)),
    );
    expect(none!.stderr).toContain('template needs a subcommand: build, import, pull, ls, inspect, rm');
    expect(unknown!.stderr).toContain('template needs a subcommand');
    expect(arity!.stderr).toContain('usage: sandbox-mcp template import NAME FILE.tar|DIR');
    expect(otherFlag!.stderr).toContain('--packages applies only to: sandbox-mcp template build');
    expect(badPackage!.stderr).toContain('--packages must be Debian package names');
    expect(serverFlag!.code).toBe(2);
  });

  it('leaves nothing half-made when an import fails, and names what was wrong', async () => {
    const junk = join(scratchDir('junk-'), 'junk.tar');
    writeFileSync(junk, Buffer.alloc(20_000, 7));
    const notRoot = scratchDir('not-a-root-');
    writeFileSync(join(notRoot, 'README'), 'no shell here\n');
    const layersBefore = readdirSync(join(store, 'layers')).sort();

    const broken = await cli(['template', 'import', 'junk', junk], env);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toContain('invalid_argument: The archive could not be extracted');
    const shellless = await cli(['template', 'import', 'shellless', notRoot], env);
    expect(shellless.code).toBe(1);
    expect(shellless.stderr).toContain('invalid_argument: What was imported has no /bin/sh at its top');
    const missing = await cli(['template', 'import', 'missing', join(notRoot, 'nope.tar')], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('FILE.tar|DIR does not exist or cannot be read');
    const holdsStore = await cli(['template', 'import', 'holds', stateDir], env);
    expect(holdsStore.stderr).toContain('FILE.tar|DIR must not contain the templates directory');

    for (const name of ['junk', 'shellless', 'missing', 'holds']) expect(readTemplate(store, name)).toBeUndefined();
    expect(readdirSync(join(store, 'layers')).sort()).toEqual(layersBefore);
    expect(leftovers()).toEqual([]);
  });

  it("removes what a dead process left half-made at the next change, and never a live process's work", async () => {
    const dead = { pid: 999_999, startTime: '1' };
    const self = identify(process.pid)!;
    const staleLayer = join(store, 'layers', `.tmp-${dead.pid}-${dead.startTime}-aaaa`);
    const liveLayer = join(store, 'layers', `.tmp-${self.pid}-${self.startTime}-bbbb`);
    for (const d of [staleLayer, liveLayer]) mkdirSync(join(d, 'root'), { recursive: true });
    writeFileSync(join(staleLayer, 'root', 'half'), 'x');
    writeFileSync(join(store, '.claims', 'stale-name'), JSON.stringify({ owner: dead, layers: [] }));
    writeFileSync(join(store, `.tmp-${dead.pid}-${dead.startTime}-cccc.json`), '{}');
    // A complete layer that no record lists (a removal killed half-way).
    const orphan = join(store, 'layers', 'ffffffffffffffff');
    mkdirSync(join(orphan, 'root'), { recursive: true });

    const r = await cli(['template', 'import', 'after-crash', tarball], env);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(staleLayer)).toBe(false);
    expect(existsSync(orphan)).toBe(false);
    expect(existsSync(liveLayer)).toBe(true);
    expect(leftovers()).toEqual([liveLayer.split('/').pop()]);
    rmSync(liveLayer, { recursive: true });
  });

  it('removes a template and the layers only it listed', async () => {
    const layer = readTemplate(store, 'from-dir')!.layers[0]!;
    const r = await cli(['template', 'rm', 'from-dir'], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('removed template from-dir\n');
    expect(readTemplate(store, 'from-dir')).toBeUndefined();
    expect(existsSync(join(store, 'layers', layer))).toBe(false);
    expect(listing((await cli(['template', 'ls', '--json'], env)).stdout).map((t) => t.name)).toEqual(['after-crash', 'mini']);

    const again = await cli(['template', 'rm', 'from-dir'], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('not_found: No template of that name');
    expect((await cli(['template', 'inspect', 'from-dir'], env)).stderr).toContain('not_found');
    expect(leftovers()).toEqual([]);
  });

  it('keeps templates where --template-dir (or SANDBOX_MCP_TEMPLATE_DIR) says, which must be private', async () => {
    const elsewhere = join(scratchDir('tpl-dir-'), 'store');
    const r = await cli(['template', 'import', 'elsewhere', tarball, '--template-dir', elsewhere], env);
    expect(r.code, r.stderr).toBe(0);
    expect(readTemplate(elsewhere, 'elsewhere')).toBeDefined();
    expect(readTemplate(store, 'elsewhere')).toBeUndefined();
    const byEnv = await cli(['template', 'ls', '--json'], { ...env, SANDBOX_MCP_TEMPLATE_DIR: elsewhere });
    expect(listing(byEnv.stdout).map((t) => t.name)).toEqual(['elsewhere']);

    expect((await cli(['template', 'ls', '--template-dir', 'relative/dir'], env)).stderr).toContain(
      '--template-dir (SANDBOX_MCP_TEMPLATE_DIR) must be an absolute path',
    );
    chmodSync(elsewhere, 0o755);
    const open = await cli(['template', 'import', 'second', tarball, '--template-dir', elsewhere], env);
    expect(open.code).toBe(1);
    expect(open.stderr).toContain("permission_denied: The templates directory must be this user's alone");
    expect(readTemplate(elsewhere, 'second')).toBeUndefined();
  });
});

describe('as a server that is not root', () => {
  const isRoot = isRootOrSkipping('import and build as nobody');
  const nobodyState = scratchDir('sandbox-mcp-nobody-');

  beforeAll(() => {
    if (isRoot) chownSync(nobodyState, NOBODY.uid, NOBODY.gid);
  });
  afterAll(() => rmSync(nobodyState, { recursive: true, force: true }));

  it.runIf(isRoot)("imports with every file the server user's and apt told to stay root", async () => {
    const withApt = makeMiniRootDir();
    mkdirSync(join(withApt, 'etc/apt/apt.conf.d'), { recursive: true });
    const tar = `${withApt}.tar`;
    execFileSync('tar', ['-cf', tar, '-C', withApt, '.']);
    chmodSync(tar, 0o644);
    const r = await cli(['template', 'import', 'flat', tar], { SANDBOX_MCP_STATE_DIR: nobodyState }, NOBODY);
    expect(r.code, r.stderr).toBe(0);
    const dir = templatesDir(nobodyState);
    const t = readTemplate(dir, 'flat')!;
    expect(t.owners).toBe('flattened');
    const root = layerRoot(dir, t.layers[0]!);
    // The tar's files were root's; here each is the server user's.
    expect(statSync(join(root, 'usr/bin/bash')).uid).toBe(NOBODY.uid);
    expect(statSync(join(root, 'etc/passwd')).uid).toBe(NOBODY.uid);
    expect(readFileSync(join(root, FLATTENED_APT_CONF.path), 'utf8')).toBe(FLATTENED_APT_CONF.text);
    rmSync(withApt, { recursive: true, force: true });
    rmSync(tar, { force: true });
  });

  it.runIf(isRoot)('is refused a build, told what it needs and what to do instead', async () => {
    const r = await cli(['template', 'build', 'deb', '--packages', 'python3'], { SANDBOX_MCP_STATE_DIR: nobodyState }, NOBODY);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('unsupported: Building a template needs root');
    expect(r.stderr).toContain('sandbox-mcp template import NAME root.tar');
    expect(readTemplate(templatesDir(nobodyState), 'deb')).toBeUndefined();
  });
});
