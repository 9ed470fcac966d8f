// The writers of the template store (store-writer.ts) and what they build on: exclusive name
// claims, layers made aside and renamed into place, exclusive publishing, removal that keeps the
// layers another template or a template being made lists; paths resolved inside a tree; the
// configuration of the templates directory and the snapshot cap; mmdebstrap's command line; the
// build's progress display.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isRootOrSkipping } from '../support/prerequisites.js';
import { BuildProgress, phaseOf } from '../../host/cli/build-progress.js';
import { describeSource } from '../../host/cli/template.js';
import { ConfigError, loadConfig } from '../../host/config/config.js';
import { localProviderOpts } from '../../host/config/local-options.js';
import { resolveSettings } from '../../host/providers/local/settings.js';
import { EATMYDATA_HOOKS, mmdebstrapArgs, parsePackageList, checkBuildSpec } from '../../host/providers/local/templates/debian-build.js';
import { resolveInTree, removeTree, treeSizeBytes } from '../../host/providers/local/templates/file-tree.js';
import { readHelper } from '../../host/providers/local/launch/perl-helpers.js';
import { fillFromWritableLayer, snapshotSizeBytes } from '../../host/providers/local/templates/snapshot.js';
import { layerRoot, readTemplate, type TemplateRecord } from '../../host/providers/local/templates/store.js';
import {
  claimName,
  ensureTemplatesDir,
  makeLayer,
  makeSharedLayer,
  publishTemplate,
  removeTemplate,
  removeUnlistedLayers,
} from '../../host/providers/local/templates/store-writer.js';
import { scratchDir } from '../support/scratch.js';

function freshStore(): string {
  const dir = join(scratchDir('tpl-writers-'), 'templates');
  ensureTemplatesDir(dir);
  return dir;
}

function recordOf(name: string, layers: string[], size = 1): TemplateRecord {
  return {
    format: 1,
    name,
    source: { kind: 'import', from: 'x.tar', format: 'tar' },
    created_at: new Date().toISOString(),
    size_bytes: size,
    layers,
    owners: 'native',
  };
}

async function makeTemplate(dir: string, name: string, base: string[] = []): Promise<TemplateRecord> {
  const claim = claimName(dir, name, base);
  try {
    const layer = await makeLayer(dir, claim, 'native', async (root) => {
      mkdirSync(root);
      writeFileSync(join(root, 'file'), name);
    });
    const record = recordOf(name, [layer.id, ...base], layer.size_bytes);
    publishTemplate(dir, claim, record);
    return record;
  } finally {
    claim.release();
  }
}

const never = async () => false;

describe('the store writers', () => {
  it('claims a name exclusively while a live process makes it, and refuses a name that exists', async () => {
    const dir = freshStore();
    const claim = claimName(dir, 'one', []);
    expect(() => claimName(dir, 'one', [])).toThrow(expect.objectContaining({ category: 'conflict', code: 'template_in_progress' }));
    claim.release();
    await makeTemplate(dir, 'one');
    expect(() => claimName(dir, 'one', [])).toThrow(expect.objectContaining({ category: 'conflict', code: 'template_exists' }));
    expect(readdirSync(join(dir, '.claims'))).toEqual([]);
  });

  it("takes over a dead process's claim", () => {
    const dir = freshStore();
    writeFileSync(join(dir, '.claims', 'two'), JSON.stringify({ owner: { pid: 999_999, startTime: '1' }, layers: [] }));
    const claim = claimName(dir, 'two', []);
    claim.release();
  });

  it('makes a layer aside and removes every trace of it when filling fails', async () => {
    const dir = freshStore();
    const claim = claimName(dir, 'bad', []);
    await expect(
      makeLayer(dir, claim, 'native', async (root) => {
        mkdirSync(root);
        writeFileSync(join(root, 'partial'), 'x');
        throw new Error('filling failed');
      }),
    ).rejects.toThrow('filling failed');
    claim.release();
    expect(readdirSync(join(dir, 'layers'))).toEqual([]);
  });

  it('shares a layer by id: one that is there is reused unfilled, a copy made meanwhile by another process wins the rename, and an id naming another layer is refused', async () => {
    const dir = freshStore();
    const id = '00000000000000c1';
    const chain = { chain_id: 'sha256:' + 'c'.repeat(64) };
    const fill = (text: string) => async (root: string) => {
      mkdirSync(root);
      writeFileSync(join(root, 'file'), text);
      return { opaqueDirs: ['opt'] };
    };
    // Two makers at once: the first to rename its copy wins; the other's is dropped and the winner's listed.
    const a = claimName(dir, 'a', []);
    const b = claimName(dir, 'b', []);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = makeSharedLayer(dir, a, id, 'native', chain, async (root) => {
      await held;
      return fill('a')(root);
    });
    const fast = await makeSharedLayer(dir, b, id, 'native', chain, fill('b'));
    expect(fast.reused).toBe(false);
    expect(fast.record.image).toEqual({ chain_id: chain.chain_id, opaque_dirs: ['opt'] });
    release();
    const late = await slow;
    expect(late).toMatchObject({ reused: true, record: { id } });
    expect(readdirSync(join(dir, 'layers'))).toEqual([id]);
    expect(execFileSync('cat', [join(layerRoot(dir, id), 'file')], { encoding: 'utf8' })).toBe('b');
    // Listed by both claims: a removal keeps it.
    expect(removeUnlistedLayers(dir)).toBe(0);
    // There already: listed, not filled.
    const c = claimName(dir, 'c', []);
    const again = await makeSharedLayer(dir, c, id, 'native', chain, async () => {
      throw new Error('filled again');
    });
    expect(again.reused).toBe(true);
    // The same id for another chain or owners: refused, nothing changed.
    await expect(makeSharedLayer(dir, c, id, 'native', { chain_id: 'sha256:' + 'd'.repeat(64) }, fill('d'))).rejects.toMatchObject({
      code: 'layer_id_taken',
    });
    await expect(makeSharedLayer(dir, c, id, 'flattened', chain, fill('d'))).rejects.toMatchObject({ code: 'layer_id_taken' });
    for (const claim of [a, b, c]) claim.release();
    expect(removeUnlistedLayers(dir)).toBe(1);
    expect(readdirSync(join(dir, 'layers'))).toEqual([]);
  });

  it('publishes exclusively: a record that appeared meanwhile is never replaced', async () => {
    const dir = freshStore();
    const claim = claimName(dir, 'race', []);
    writeFileSync(join(dir, 'race.json'), JSON.stringify(recordOf('race', ['00000000000000aa'])));
    expect(() => publishTemplate(dir, claim, recordOf('race', ['00000000000000bb']))).toThrow(
      expect.objectContaining({ code: 'template_exists' }),
    );
    claim.release();
    expect(readTemplate(dir, 'race')?.layers).toEqual(['00000000000000aa']);
    expect(readdirSync(dir).filter((n) => n.startsWith('.tmp-'))).toEqual([]);
  });

  it('removes a template, keeping the layers another template or a live claim lists', async () => {
    const dir = freshStore();
    const parent = await makeTemplate(dir, 'parent');
    const child = await makeTemplate(dir, 'child', parent.layers);
    const pending = claimName(dir, 'pending', child.layers);

    await removeTemplate(dir, 'parent', never);
    expect(readTemplate(dir, 'parent')).toBeUndefined();
    expect(existsSync(layerRoot(dir, parent.layers[0]!))).toBe(true);
    await removeTemplate(dir, 'child', never);
    // Still listed by the claim of a template being made on it.
    expect(existsSync(layerRoot(dir, child.layers[0]!))).toBe(true);
    expect(existsSync(layerRoot(dir, parent.layers[0]!))).toBe(true);
    pending.release();
    expect(removeUnlistedLayers(dir)).toBe(2);
    expect(readdirSync(join(dir, 'layers'))).toEqual([]);
  });

  it('refuses to remove a template in use, before and after its record is out of sight, and changes nothing', async () => {
    const dir = freshStore();
    const t = await makeTemplate(dir, 'used');
    await expect(removeTemplate(dir, 'used', async () => true)).rejects.toMatchObject({ category: 'conflict', code: 'template_in_use' });
    // A create that read the record just before: in use only on the second look.
    let looks = 0;
    await expect(removeTemplate(dir, 'used', async () => ++looks > 1)).rejects.toMatchObject({ code: 'template_in_use' });
    expect(readTemplate(dir, 'used')).toEqual(t);
    expect(existsSync(layerRoot(dir, t.layers[0]!))).toBe(true);
    await expect(removeTemplate(dir, 'missing', never)).rejects.toMatchObject({ category: 'not_found' });
  });

  it('refuses a templates directory others can enter', () => {
    const dir = join(scratchDir('tpl-open-'), 'templates');
    mkdirSync(dir, { mode: 0o755 });
    execFileSync('chmod', ['755', dir]);
    expect(() => ensureTemplatesDir(dir)).toThrow(expect.objectContaining({ category: 'permission_denied' }));
  });
});

describe('file trees', () => {
  it('resolves paths inside a tree, absolute links included, never out of it', () => {
    const root = scratchDir('tree-');
    mkdirSync(join(root, 'usr/bin'), { recursive: true });
    writeFileSync(join(root, 'usr/bin/dash'), '');
    symlinkSync('usr/bin', join(root, 'bin'));
    symlinkSync('/usr/bin/dash', join(root, 'usr/bin/sh'));
    symlinkSync('../../../../../etc', join(root, 'escape'));
    expect(resolveInTree(root, '/bin/sh')).toBe(join(root, 'usr/bin/dash'));
    expect(resolveInTree(root, '/escape/passwd')).toBe(null);
    symlinkSync('loop', join(root, 'loop'));
    expect(resolveInTree(root, '/loop/x')).toBe(null);
  });

  it('counts a hard-linked file once', () => {
    const root = scratchDir('size-');
    writeFileSync(join(root, 'a'), Buffer.alloc(10_000));
    execFileSync('ln', [join(root, 'a'), join(root, 'b')]);
    const size = treeSizeBytes(root);
    expect(size).toBeGreaterThanOrEqual(10_000);
    expect(size).toBeLessThan(20_000);
  });

  it.skipIf(!isRootOrSkipping('mounting a tmpfs inside a tree'))('never removes a tree with something mounted inside', () => {
    const root = scratchDir('mounted-');
    mkdirSync(join(root, 'dev'));
    writeFileSync(join(root, 'plain'), 'x');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tpl-test', join(root, 'dev')]);
    try {
      writeFileSync(join(root, 'dev', 'inside-the-mount'), 'x');
      expect(removeTree(root)).toBe(false);
      expect(existsSync(join(root, 'dev', 'inside-the-mount'))).toBe(true);
      expect(existsSync(join(root, 'plain'))).toBe(true);
    } finally {
      execFileSync('umount', [join(root, 'dev')]);
    }
    expect(removeTree(root)).toBe(true);
    expect(existsSync(root)).toBe(false);
  });
});

describe('the configuration', () => {
  it('takes the templates directory from the flag or the variable, absolute only, and hides it in sandboxes', () => {
    expect(loadConfig({}).templatesDir).toBeUndefined();
    expect(loadConfig({ SANDBOX_MCP_TEMPLATE_DIR: '/srv/t' }).templatesDir).toBe('/srv/t');
    expect(loadConfig({ SANDBOX_MCP_TEMPLATE_DIR: '/srv/t' }, { templateDir: '/srv/u' }).templatesDir).toBe('/srv/u');
    expect(() => loadConfig({ SANDBOX_MCP_TEMPLATE_DIR: 'rel' })).toThrow(ConfigError);
    const settings = resolveSettings(localProviderOpts({ ...loadConfig({ SANDBOX_MCP_STATE_DIR: '/s' }), localNetwork: 'isolated' }));
    expect(settings.templatesDir).toBe('/s/templates');
    expect(resolveSettings(localProviderOpts(loadConfig({ SANDBOX_MCP_TEMPLATE_DIR: '/srv/t' }))).templatesDir).toBe('/srv/t');
  });

  it('caps snapshot storage at 10240 MB unless configured; 0 allows none; anything else is refused naming both names', () => {
    expect(resolveSettings({}).maxSnapshotStorageBytes).toBe(10_240 * 1024 * 1024);
    expect(loadConfig({ SANDBOX_MCP_MAX_SNAPSHOT_STORAGE: '5' }).maxSnapshotStorageMb).toBe(5);
    expect(loadConfig({ SANDBOX_MCP_MAX_SNAPSHOT_STORAGE: '5' }, { maxSnapshotStorage: '0' }).maxSnapshotStorageMb).toBe(0);
    expect(resolveSettings(localProviderOpts(loadConfig({}, { maxSnapshotStorage: '3' }))).maxSnapshotStorageBytes).toBe(3 * 1024 * 1024);
    for (const bad of ['-1', '1.5', 'lots', '1e3']) {
      expect(() => loadConfig({ SANDBOX_MCP_MAX_SNAPSHOT_STORAGE: bad }), bad).toThrow(
        '--max-snapshot-storage (SANDBOX_MCP_MAX_SNAPSHOT_STORAGE) must be a whole number of MB',
      );
    }
  });
});

describe('template build', () => {
  it("runs mmdebstrap as root, apt's variant plus the packages, under eatmydata where it exists, with the cache hooks only for a cache", () => {
    const args = mmdebstrapArgs({ suite: 'stable', packages: ['python3', 'git'] }, '/t/root', { hasEatmydata: true });
    expect(args.slice(0, 5)).toEqual([
      '--mode=root',
      '--variant=apt',
      '--format=directory',
      '--include=python3,git',
      `--hook-dir=${EATMYDATA_HOOKS}`,
    ]);
    expect(args.slice(-3)).toEqual(['--customize-hook=rm -f "$1/etc/resolv.conf" "$1/etc/hostname"', 'stable', '/t/root']);
    expect(args.some((a) => a.includes('sync-'))).toBe(false);
    const cached = mmdebstrapArgs({ suite: 'bookworm', packages: [], packageCache: '/c' }, '/t/root', { hasEatmydata: false });
    expect(cached.some((a) => a.startsWith('--include') || a.startsWith('--hook-dir'))).toBe(false);
    expect(cached).toContain('--setup-hook=sync-in /c /var/cache/apt/archives/');
    expect(cached).toContain('--customize-hook=sync-out /var/cache/apt/archives /c');
    expect(cached).toContain('--skip=essential/unlink');
    // Without a mirror, mmdebstrap's own sources (a stable suite's updates and security too); with one, only it.
    expect(cached.at(-1)).toBe('/t/root');
    const mirrored = mmdebstrapArgs({ suite: 'bookworm', packages: [], mirror: 'http://m.test/debian' }, '/t/root', {
      hasEatmydata: false,
    });
    expect(mirrored.slice(-3)).toEqual(['bookworm', '/t/root', 'http://m.test/debian']);
  });

  it('checks package names, the suite and the cache path, naming the field', () => {
    expect(parsePackageList(' python3, git,python3 ', '--packages')).toEqual(['python3', 'git']);
    expect(parsePackageList(undefined, '--packages')).toEqual([]);
    expect(() => parsePackageList('ok,Bad_Name', '--packages')).toThrow('--packages must be Debian package names');
    expect(() => parsePackageList('x;rm -rf /', '--packages')).toThrow('--packages must be');
    const fields = { suite: '--suite', packageCache: '--package-cache', mirror: '--mirror' };
    expect(() => checkBuildSpec({ suite: 'Stable!', packages: [] }, fields)).toThrow('--suite must be a Debian suite');
    expect(() => checkBuildSpec({ suite: 'stable', packages: [], packageCache: 'rel' }, fields)).toThrow(
      '--package-cache must be an absolute path',
    );
    expect(() => checkBuildSpec({ suite: 'stable', packages: [], packageCache: '/a b' }, fields)).toThrow('--package-cache must be');
    expect(() => checkBuildSpec({ suite: 'stable', packages: [], mirror: 'ftp://x' }, fields)).toThrow('--mirror must be an http://');
    expect(() => checkBuildSpec({ suite: 'stable', packages: [], mirror: 'http://a b' }, fields)).toThrow('--mirror must be');
    checkBuildSpec(
      { suite: 'bookworm-backports', packages: [], packageCache: '/var/cache/x', mirror: 'http://deb.debian.org/debian' },
      fields,
    );
  });

  it('shows a spinner with the phase on a terminal, and the progress lines elsewhere', () => {
    const written: string[] = [];
    let nowMs = 1_000;
    const tty = new BuildProgress(
      { isTTY: true, columns: 200, write: (t: string) => written.push(t) },
      'building template py',
      () => nowMs,
    );
    nowMs += 42_000;
    tty.line('I: installing essential packages...');
    tty.line('Get:1 http://deb.debian.org/debian bookworm/main amd64 x [1 kB]');
    tty.line('W: something to know');
    tty.finish(true);
    expect(written.join('')).toContain('\r\x1b[K⠋ building template py: installing essential packages (0:42)');
    expect(written.join('')).toContain('\r\x1b[KW: something to know\n');
    expect(written.join('')).not.toContain('Get:1');
    expect(written.at(-1)).toBe('\r\x1b[K');

    const plain: string[] = [];
    const log = new BuildProgress({ write: (t: string) => plain.push(t) }, 'building template py');
    log.line('I: running apt-get update...');
    log.line('Get:1 chatter');
    log.line('E: it broke');
    log.finish(false);
    expect(plain.join('')).toBe(
      'building template py: started\nI: running apt-get update...\nE: it broke\n' +
        'building template py: the last lines mmdebstrap printed:\n  I: running apt-get update...\n  Get:1 chatter\n  E: it broke\n',
    );
    expect(plain.join('')).not.toContain('\r');
    expect(phaseOf('I: running --customize-hook in shell: sh -c \'rm -f "$1/x"\' exec /t')).toBe('running --customize-hook');
  });

  it('describes each kind of source for people', () => {
    expect(describeSource({ kind: 'debian', suite: 'stable', packages: ['python3', 'git'], variant: 'apt' })).toBe(
      'debian stable + python3,git',
    );
    expect(describeSource({ kind: 'debian', suite: 'sid', packages: [], variant: 'apt' })).toBe('debian sid');
    expect(describeSource({ kind: 'import', from: 'root.tar', format: 'tar' })).toBe('import of root.tar');
    expect(describeSource({ kind: 'snapshot', sandbox_id: 'abc', parent: 'py' })).toBe('snapshot of py');
  });
});

describe('a snapshot of a writable layer', () => {
  /** An upper directory as apt leaves it after `apt-get update && apt-get install`: lists, archives, a program. */
  function aptUpper(): string {
    const upper = scratchDir('tpl-upper-');
    mkdirSync(join(upper, 'var/lib/apt/lists/partial'), { recursive: true });
    writeFileSync(join(upper, 'var/lib/apt/lists/deb.debian.org_debian_dists_stable_main_binary-amd64_Packages'), 'x'.repeat(5000));
    mkdirSync(join(upper, 'var/cache/apt/archives/partial'), { recursive: true });
    writeFileSync(join(upper, 'var/cache/apt/archives/hello_2.10-3_amd64.deb'), 'y'.repeat(3000));
    writeFileSync(join(upper, 'var/cache/apt/archives/lock'), '');
    mkdirSync(join(upper, 'usr/bin'), { recursive: true });
    writeFileSync(join(upper, 'usr/bin/hello'), 'z'.repeat(100));
    return upper;
  }
  const view = (upperDir: string) => ({ upperDir, ownerShift: 0, freeze: async () => null });
  // The copy's helper from the source tree (helpers/copy-meta.pl), with no cap.
  const copyOpts = (keepAptCache: boolean) => ({
    helper: {
      perl: 'perl',
      text: readHelper(join(import.meta.dirname, '../../host/providers/local/helpers'), 'copy-meta'),
      arch: process.arch as 'x64',
    },
    budget: { left: Number.MAX_SAFE_INTEGER, overCap: () => new Error('over the cap') as never },
    rules: { keepAptCache },
  });
  const files = (root: string) => execFileSync('find', ['.', '-mindepth', '1'], { cwd: root, encoding: 'utf8' }).trim().split('\n').sort();

  it("leaves apt's downloaded lists and .deb archives out, keeping their directories and what else is there; counts the same", async () => {
    const upper = aptUpper();
    const root = join(scratchDir('tpl-snap-'), 'root');
    await fillFromWritableLayer(root, view(upper), copyOpts(false));
    expect(files(root)).toEqual(
      [
        './usr',
        './usr/bin',
        './usr/bin/hello',
        './var',
        './var/cache',
        './var/cache/apt',
        './var/cache/apt/archives',
        './var/cache/apt/archives/lock',
        './var/cache/apt/archives/partial',
        './var/lib',
        './var/lib/apt',
        './var/lib/apt/lists',
      ].sort(),
    );
    expect(snapshotSizeBytes(view(upper))).toBe(treeSizeBytes(root));
  });

  it('keeps them when asked (keep_apt_cache)', async () => {
    const upper = aptUpper();
    const root = join(scratchDir('tpl-snap-'), 'root');
    await fillFromWritableLayer(root, view(upper), copyOpts(true));
    expect(files(root)).toEqual(files(upper));
    expect(snapshotSizeBytes(view(upper), { keepAptCache: true })).toBe(treeSizeBytes(root));
  });
});
