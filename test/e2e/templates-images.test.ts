// Container images as templates, through the BUILT bin: `template pull` from a real registry on the
// loopback (Debian's docker-registry, plain HTTP; and one behind token auth with an issuer of ours),
// and `template import` of an OCI layout (directory and tar) and a docker save archive, all of
// images made here from a mini root. What lands in the store (whiteouts and opaque directories
// applied, links kept as links and resolved inside the tree, hard links, set-id bits dropped, the
// config kept), blobs shared by digest (the registry's own log shows what was fetched), the
// platform chosen from an index, and refusals that name the reference and leave nothing: a
// missing tag, an unknown platform, a refused login, a tampered blob. And a sandbox on an image
// template (no node in it) through the built server: the image's Env and WorkingDir for commands,
// tasks and a sandbox from its snapshot.
import { spawn as spawnPty } from '@lydell/node-pty';
import { execFile, execFileSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
  lstatSync,
  readlinkSync,
  rmSync,
} from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { layerRoot, readTemplate, templatesDir } from '../../host/providers/local/templates/store.js';
import { connectStdio, ok, serverEnv, startHttp, toolError } from '../support/built-server.js';
import {
  digestOf,
  packLayer,
  pushLayout,
  startRegistry,
  tarDirectory,
  writeDockerArchive,
  writeOciLayout,
  type TestRegistry,
} from '../support/image-fixtures.js';
import { makeMiniRootDir } from '../support/mini-root.js';
import { BEFORE_RUN_AS, olderBuild } from '../support/older-build.js';
import { HOST_JS } from '../support/paths.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { isRootOrSkipping, requireBuild, requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { ppidOf, runningWith } from '../support/processes.js';
import { destroyStateDir, residentRecordOf, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';
import { scratchDir } from '../support/scratch.js';

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], env: Record<string, string>, input?: string, as?: { uid: number; gid: number }): Promise<CliResult> {
  return new Promise((resolve) => {
    const hostJs = as ? hostJsReadableBy(as) : HOST_JS;
    const child = execFile(process.execPath, [hostJs, ...args], { env: serverEnv(env), ...(as ?? {}) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdin!.end(input ?? '');
  });
}

const stateDir = tempStateDir();
const env = { SANDBOX_MCP_STATE_DIR: stateDir };
const store = templatesDir(stateDir);
const isRoot = process.geteuid?.() === 0;
const NOBODY = { uid: 65534, gid: 65534 };

let base: Buffer;
let top: Buffer;
let other: Buffer;
let layout: string;
let registry: TestRegistry;

/** A directory with `files` (relative path: content, or a function making it). */
function tree(files: Record<string, string | ((path: string) => void)>): string {
  const dir = scratchDir('layer-');
  for (const [rel, content] of Object.entries(files)) {
    const path = join(dir, rel);
    mkdirSync(join(path, '..'), { recursive: true });
    if (typeof content === 'string') writeFileSync(path, content);
    else content(path);
  }
  return dir;
}

const CONFIG = { Env: ['GREETING=hello from the image', 'PATH=/usr/local/bin:/usr/bin:/bin'], WorkingDir: '/srv/app', Cmd: ['sh'] };

/** The digest of a layer as the fixtures store it (gzip, level 1). */
function gzipped(tar: Buffer): string {
  return digestOf(gzipSync(tar, { level: 1 }));
}

/**
 * What a sandbox on template `name` sees as its root: its one layer, or (an image on a root
 * server: a layer per image layer) a copy of its layers' merged view, mounted read-only as a
 * sandbox's overlay mounts them (the kernel's overlayfs, in a mount namespace of its own).
 */
function rootOf(name: string): string {
  const record = readTemplate(store, name);
  expect(record).toBeDefined();
  const lowers = record!.layers.map((id) => layerRoot(store, id));
  if (lowers.length === 1) return lowers[0]!;
  const out = scratchDir('merged-');
  mkdirSync(join(out, 'mnt'));
  mkdirSync(join(out, 'copy'));
  execFileSync('unshare', [
    '--mount',
    'sh',
    '-c',
    'mount -t overlay overlay -o "ro,lowerdir=$1" "$2/mnt" && cp -a "$2/mnt/." "$2/copy/"',
    'sh',
    lowers.join(':'),
    out,
  ]);
  return join(out, 'copy');
}

/** Bytes of a directory's files on disk, each inode once (du). */
function duBytes(path: string): number {
  return Number(execFileSync('du', ['-s', '-B1', '--apparent-size', path], { encoding: 'utf8' }).split('\t')[0]);
}

/** The store's layers, by id. */
function storeLayers(): string[] {
  return readdirSync(join(store, 'layers'))
    .filter((n) => /^[0-9a-f]{16}$/.test(n))
    .sort();
}

/** A layer tar (uncompressed) of one hard link `path` to `target` (paths inside the root), made here: GNU tar links only to members it holds. */
function hardLinkLayer(path: string, target: string): Buffer {
  const header = Buffer.alloc(512);
  const put = (text: string, at: number, length: number) => header.write(text, at, length, 'latin1');
  put(path, 0, 100);
  put('0000644\0', 100, 8);
  put('0000000\0', 108, 8);
  put('0000000\0', 116, 8);
  put('00000000000\0', 124, 12);
  put('00000000000\0', 136, 12);
  put('        ', 148, 8);
  put('1', 156, 1);
  put(target, 157, 100);
  put('ustar\0' + '00', 257, 8);
  let sum = 0;
  for (const byte of header) sum += byte;
  put(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8);
  return Buffer.concat([header, Buffer.alloc(1024)]);
}

/** What a two-layer image made of `base` and `top` must look like once applied. */
function expectApplied(root: string): void {
  expect(existsSync(join(root, 'etc/doomed'))).toBe(false); // .wh.doomed
  expect(readdirSync(join(root, 'opt/old')).sort()).toEqual(['new']); // opaque: lower's a, b gone
  expect(readFileSync(join(root, 'etc/replaced'), 'utf8')).toBe('top\n');
  // A member under an absolute link went inside the tree (the link's target in it), never the host's.
  expect(readFileSync(join(root, 'etc/planted'), 'utf8')).toBe('inside\n');
  expect(existsSync('/etc/planted')).toBe(false);
  expect(lstatSync(join(root, 'hostetc')).isSymbolicLink()).toBe(true);
  expect(readlinkSync(join(root, 'hostetc'))).toBe('/etc');
  // Set-id dropped, the rest of the mode kept; a hard link is one inode.
  expect(statSync(join(root, 'usr/bin/suid')).mode & 0o7777).toBe(0o755);
  expect(statSync(join(root, 'usr/bin/linked')).ino).toBe(statSync(join(root, 'usr/bin/suid')).ino);
  expect(existsSync(join(root, 'bin/sh'))).toBe(true);
}

beforeAll(async () => {
  requireBuild();
  requireCommands(['skopeo', 'docker-registry', 'openssl']);
  const mini = makeMiniRootDir();
  writeFileSync(join(mini, 'etc/doomed'), 'lower\n');
  writeFileSync(join(mini, 'etc/replaced'), 'lower\n');
  mkdirSync(join(mini, 'opt/old'), { recursive: true });
  writeFileSync(join(mini, 'opt/old/a'), 'a');
  writeFileSync(join(mini, 'opt/old/b'), 'b');
  writeFileSync(join(mini, 'usr/bin/suid'), '#!/bin/sh\n', { mode: 0o755 });
  execFileSync('chmod', ['4755', join(mini, 'usr/bin/suid')]);
  execFileSync('ln', [join(mini, 'usr/bin/suid'), join(mini, 'usr/bin/linked')]);
  symlinkSync('/etc', join(mini, 'hostetc'));
  base = packLayer(mini);
  top = packLayer(
    tree({
      'etc/.wh.doomed': '',
      'etc/replaced': 'top\n',
      'opt/old/.wh..wh..opq': '',
      'opt/old/new': 'new\n',
      'hostetc/planted': 'inside\n',
      'srv/app/README': 'app\n',
    }),
    // No `hostetc` of its own: `hostetc/planted` goes through the lower layer's link.
    ['hostetc'],
  );
  other = packLayer(tree({ 'srv/other': 'other\n' }));
  layout = writeOciLayout([{ layers: [base, top], config: CONFIG }]);
  registry = await startRegistry();
  await pushLayout(layout, registry, 'app:1');
}, 60_000);

afterAll(async () => {
  await registry?.stop();
  await destroyStateDir(stateDir);
});

/** Blob GETs the registry served for `digest` so far (its access log). */
function blobFetches(r: TestRegistry, digest: string): number {
  return r
    .log()
    .split('\n')
    .filter((l) => l.includes(`GET /v2/`) && l.includes(`/blobs/${digest}`) && !l.includes('HEAD')).length;
}

describe('template import of images on disk', () => {
  it('applies an OCI layout directory: whiteouts, opaque directories, links in the tree, set-id dropped; the config kept', async () => {
    const r = await cli(['template', 'import', 'fromlayout', layout], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^imported template fromlayout: image .+ \(oci-layout\)/);
    expectApplied(rootOf('fromlayout'));
    const record = readTemplate(store, 'fromlayout')!;
    expect(record.source).toEqual({ kind: 'image', from: expect.any(String), format: 'oci-layout' });
    expect(record.image?.config.env).toEqual(CONFIG.Env);
    expect(record.image?.config.working_dir).toBe('/srv/app');
    expect(record.image?.user_ids).toEqual({ uid: 0, gid: 0 });
    expect(record.image?.layers).toEqual([gzipped(base), gzipped(top)]);
    expect(record.owners).toBe(isRoot ? 'native' : 'flattened');
    if (isRoot) {
      // A store layer per image layer, top first; the top one holds only what it changes: a
      // whiteout (a 0/0 character device) for etc/doomed, opt/old marked opaque, no copy of the base.
      expect(record.layers).toHaveLength(2);
      const topRoot = layerRoot(store, record.layers[0]!);
      const whiteout = lstatSync(join(topRoot, 'etc/doomed'));
      expect(whiteout.isCharacterDevice() && whiteout.rdev === 0).toBe(true);
      expect(existsSync(join(topRoot, 'bin'))).toBe(false);
      const topLayer = JSON.parse(readFileSync(join(store, 'layers', record.layers[0]!, 'layer.json'), 'utf8'));
      expect(topLayer.image.opaque_dirs).toEqual(['opt/old']);
      expect(record.size_bytes).toBe(
        record.layers.reduce((sum, id) => sum + JSON.parse(readFileSync(join(store, 'layers', id, 'layer.json'), 'utf8')).size_bytes, 0),
      );
    }
  });

  it('shares layers by chain id: a second image on the same base stores only its new layer, the same image again none, and a base goes with the last template listing it', async () => {
    if (!isRoot) return; // A server that is not root applies each image into one layer of its own (docs/templates.md).
    const own = makeMiniRootDir();
    writeFileSync(join(own, 'etc/own-base'), 'own\n'.repeat(10_000));
    const ownBase = packLayer(own);
    const one = packLayer(tree({ 'srv/one': 'one\n' }));
    const two = packLayer(tree({ 'srv/two': 'two\n' }));
    const before = storeLayers();
    expect((await cli(['template', 'import', 'share-one', writeOciLayout([{ layers: [ownBase, one], config: CONFIG }])], env)).code).toBe(
      0,
    );
    const afterOne = storeLayers();
    expect(afterOne.length - before.length).toBe(2);
    const bytesBefore = duBytes(join(store, 'layers'));
    // docker save's archive of another image on that base: the same diff ids, so the same base layer.
    expect((await cli(['template', 'import', 'share-two', writeDockerArchive({ layers: [ownBase, two], config: CONFIG })], env)).code).toBe(
      0,
    );
    const recOne = readTemplate(store, 'share-one')!;
    const recTwo = readTemplate(store, 'share-two')!;
    expect(recTwo.layers[1]).toBe(recOne.layers[1]);
    expect(recTwo.layers[0]).not.toBe(recOne.layers[0]);
    expect(storeLayers().length - afterOne.length).toBe(1);
    const baseFile = join(layerRoot(store, recOne.layers[1]!), 'etc/own-base');
    expect(statSync(baseFile).nlink).toBe(1); // one file, listed by both: not a hard-linked copy
    // Only the new layer's bytes were stored (its root's few directories and srv/two, far below the base's 40 kB).
    const added = duBytes(join(store, 'layers')) - bytesBefore;
    expect(added).toBe(duBytes(join(store, 'layers', recTwo.layers[0]!)));
    expect(added).toBeLessThan(40_000);
    expect(readFileSync(join(rootOf('share-two'), 'srv/two'), 'utf8')).toBe('two\n');
    expect(existsSync(join(rootOf('share-two'), 'srv/one'))).toBe(false);
    // The same image under a second name: no new layer, the same stack.
    expect((await cli(['template', 'import', 'share-again', writeOciLayout([{ layers: [ownBase, one], config: CONFIG }])], env)).code).toBe(
      0,
    );
    expect(readTemplate(store, 'share-again')!.layers).toEqual(recOne.layers);
    expect(storeLayers().length - afterOne.length).toBe(1);
    // Removing templates: a layer stays while any template lists it.
    expect((await cli(['template', 'rm', 'share-one'], env)).code).toBe(0);
    expect((await cli(['template', 'rm', 'share-again'], env)).code).toBe(0);
    expect(existsSync(layerRoot(store, recOne.layers[0]!))).toBe(false);
    expect(existsSync(baseFile)).toBe(true);
    expect(readFileSync(join(rootOf('share-two'), 'etc/own-base'), 'utf8')).toContain('own');
    expect((await cli(['template', 'rm', 'share-two'], env)).code).toBe(0);
    expect(existsSync(layerRoot(store, recOne.layers[1]!))).toBe(false);
    expect(storeLayers()).toEqual(before);
  });

  it('two imports at once of images on one base the store does not have: both made, the base stored once', async () => {
    const own = makeMiniRootDir();
    writeFileSync(join(own, 'etc/raced-base'), 'raced\n'.repeat(50_000));
    const racedBase = packLayer(own);
    const layouts = ['a', 'b'].map((n) => writeOciLayout([{ layers: [racedBase, packLayer(tree({ [`srv/${n}`]: n }))], config: CONFIG }]));
    const before = storeLayers();
    const results = await Promise.all([
      cli(['template', 'import', 'raced-a', layouts[0]!], env),
      cli(['template', 'import', 'raced-b', layouts[1]!], env),
    ]);
    expect(results.map((r) => [r.code, r.stderr])).toEqual([
      [0, ''],
      [0, ''],
    ]);
    const [a, b] = [readTemplate(store, 'raced-a')!, readTemplate(store, 'raced-b')!];
    expect(a.layers[1]).toBe(b.layers[1]);
    expect(storeLayers().length - before.length).toBe(3);
    expect(readdirSync(join(store, 'layers')).filter((n) => n.startsWith('.'))).toEqual([]);
    expect(readFileSync(join(rootOf('raced-b'), 'srv/b'), 'utf8')).toBe('b');
  });

  it('takes the same layout as a tar archive, and what docker save writes', async () => {
    const a = await cli(['template', 'import', 'fromlayouttar', tarDirectory(layout)], env);
    expect(a.code).toBe(0);
    expectApplied(rootOf('fromlayouttar'));
    const saved = writeDockerArchive({ layers: [base, top], config: CONFIG });
    const b = await cli(['template', 'import', 'fromsave', saved], env);
    expect(b.stderr).toBe('');
    expect(b.code).toBe(0);
    expectApplied(rootOf('fromsave'));
    expect(readTemplate(store, 'fromsave')!.source.kind).toBe('image');
    expect(readTemplate(store, 'fromsave')!.image?.layers).toEqual([digestOf(base), digestOf(top)]);
    const inspect = await cli(['template', 'inspect', 'fromsave'], env);
    expect(JSON.parse(inspect.stdout).image.config.working_dir).toBe('/srv/app');
  });

  it('refuses a layout whose blob was tampered with, naming the digest, and keeps nothing (not the layers under it either)', async () => {
    // A bottom layer the store has not seen (made, then dropped) and a tampered one on it.
    const fresh = makeMiniRootDir();
    writeFileSync(join(fresh, 'etc/fresh'), 'fresh\n');
    const freshLayer = packLayer(fresh);
    const doomed = packLayer(tree({ 'srv/doomed': 'doomed\n'.repeat(1000) }));
    const bad = writeOciLayout([{ layers: [freshLayer, doomed], config: CONFIG }]);
    const blobs = join(bad, 'blobs/sha256');
    // Flip a byte in the middle of the top layer's blob.
    const victim = gzipped(doomed).slice(7);
    const bytes = readFileSync(join(blobs, victim));
    bytes[bytes.length >> 1]! ^= 0xff;
    writeFileSync(join(blobs, victim), bytes);
    const layersBefore = readdirSync(join(store, 'layers')).sort();
    const r = await cli(['template', 'import', 'tampered', bad], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`sha256:${victim}`);
    expect(r.stderr).toMatch(/does not match its digest/);
    expect(readTemplate(store, 'tampered')).toBeUndefined();
    expect(readdirSync(join(store, 'layers')).sort()).toEqual(layersBefore);
  });
});

describe('template pull from a registry on the loopback', () => {
  it('pulls a two-layer image over plain HTTP to 127.0.0.1, applied as an import is, with reference and digest recorded', async () => {
    const ref = `${registry.host}/app:1`;
    const r = await cli(['template', 'pull', 'pulled', ref], env);
    expect(r.stderr.split('\n').filter((l) => /level=(error|fatal)/.test(l))).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^pulled template pulled: image ${ref.replace(/[.]/g, '\\.')}`));
    expectApplied(rootOf('pulled'));
    const record = readTemplate(store, 'pulled')!;
    expect(record.image?.reference).toBe(ref);
    expect(record.image?.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const ls = await cli(['template', 'ls'], env);
    expect(ls.stdout).toMatch(new RegExp(`pulled\\s+image ${ref.replace(/[.]/g, '\\.')}`));
  });

  it('fetches a shared base layer once: a second image on it, and the same image again, fetch only what is new', async () => {
    const second = writeOciLayout([{ layers: [base, other], config: CONFIG }]);
    await pushLayout(second, registry, 'app2:1');
    const baseDigest = gzipped(base);
    const before = blobFetches(registry, baseDigest);
    const cached = readdirSync(join(store, 'images/blobs/sha256')).length;
    expect((await cli(['template', 'pull', 'second', `${registry.host}/app2:1`], env)).code).toBe(0);
    expect((await cli(['template', 'pull', 'again', `${registry.host}/app:1`], env)).code).toBe(0);
    expect(readFileSync(join(rootOf('second'), 'srv/other'), 'utf8')).toBe('other\n');
    // One new layer, one config, one manifest in the cache; no base layer fetched again.
    expect(readdirSync(join(store, 'images/blobs/sha256')).length).toBe(cached + 3);
    expect(blobFetches(registry, baseDigest) - before).toBe(0);
    if (isRoot) {
      // Nor stored again: the base layer is the one the first pull (and the imports) made, the same image again is the same stack.
      const pulled = readTemplate(store, 'pulled')!;
      expect(readTemplate(store, 'second')!.layers[1]).toBe(pulled.layers[1]);
      expect(readTemplate(store, 'again')!.layers).toEqual(pulled.layers);
      expect(readTemplate(store, 'fromlayout')!.layers).toEqual(pulled.layers);
    }
  });

  it('shows its progress on a terminal (a real pty): a bar per blob redrawn in place, the manifest written, then the template made', async () => {
    const fresh = writeOciLayout([{ layers: [base, packLayer(tree({ 'srv/onterm': 'x\n' }))], config: CONFIG }]);
    await pushLayout(fresh, registry, 'onterm:1');
    const term = spawnPty(process.execPath, [HOST_JS, 'template', 'pull', 'onterm', `${registry.host}/onterm:1`], {
      cols: 120,
      rows: 30,
      env: serverEnv({ ...env, TERM: 'xterm' }),
    });
    let shown = '';
    term.onData((d) => (shown += d));
    const code = await new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
    const text = shown.replaceAll('\r', '');
    expect(code, text).toBe(0);
    // skopeo's own display: the base is in the blob cache already, the new layer is fetched.
    // skopeo's own display: a bar per blob, redrawn in place (cursor up), then done.
    expect(text).toMatch(/Copying blob [0-9a-f]+ \[=+\] [\d.]+\w+ \/ [\d.]+\w+\n/);
    expect(text).toContain('\u001b[2A');
    expect(text).toMatch(/Copying blob [0-9a-f]+ done/);
    expect(text).toMatch(/Writing manifest/);
    expect(text).toMatch(new RegExp(`pulled template onterm: image ${registry.host.replace(/[.]/g, '\\.')}/onterm:1`));
  });

  it('chooses this machine platform from an index, and refuses one without it, naming the reference', async () => {
    const arch = process.arch === 'x64' ? 'amd64' : 'arm64';
    const otherArch = arch === 'amd64' ? 'arm64' : 'amd64';
    const mark = (text: string) => packLayer(tree({ 'etc/platform': text }));
    const multi = writeOciLayout(
      [
        { layers: [base, mark(otherArch)], architecture: otherArch },
        { layers: [base, mark(arch)], architecture: arch },
      ],
      { asIndex: true },
    );
    await pushLayout(multi, registry, 'multi:1');
    expect((await cli(['template', 'pull', 'multi', `${registry.host}/multi:1`], env)).code).toBe(0);
    expect(readFileSync(join(rootOf('multi'), 'etc/platform'), 'utf8')).toBe(arch);
    const foreign = writeOciLayout([{ layers: [base], architecture: 's390x' }], { asIndex: true });
    await pushLayout(foreign, registry, 'foreign:1');
    const r = await cli(['template', 'pull', 'foreign', `${registry.host}/foreign:1`], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${registry.host}/foreign:1`);
    expect(r.stderr).toMatch(/no variant for this machine's platform/);
  });

  it('refuses a missing tag and a tampered blob, naming them, and keeps no template', async () => {
    const missing = await cli(['template', 'pull', 'missing', `${registry.host}/app:nope`], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`not_found`);
    expect(missing.stderr).toContain(`No image ${registry.host}/app:nope`);
    // A layer of its own, corrupted in the registry's storage after the push.
    const lone = packLayer(tree({ 'srv/lone': 'lone\n' }));
    await pushLayout(writeOciLayout([{ layers: [base, lone] }]), registry, 'tamper:1');
    const loneDigest = gzipped(lone);
    const data = join(registry.storage, 'docker/registry/v2/blobs/sha256', loneDigest.slice(7, 9), loneDigest.slice(7), 'data');
    const bytes = readFileSync(data);
    bytes[bytes.length >> 1]! ^= 0xff;
    writeFileSync(data, bytes);
    const r = await cli(['template', 'pull', 'tampered', `${registry.host}/tamper:1`], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/does not match its digest/);
    expect(r.stderr).toContain(loneDigest);
    expect(readTemplate(store, 'tampered')).toBeUndefined();
    expect(existsSync(join(store, 'images/blobs/sha256', loneDigest.slice(7)))).toBe(false);
    expect(readdirSync(join(store, 'images')).filter((n) => n !== 'blobs')).toEqual([]);
  });
});

describe('template pull behind token auth (a registry with an issuer of ours: JWTs signed by a cert in its rootcertbundle)', () => {
  let secured: TestRegistry;
  let login: { username: string; password: string };
  const layoutOnce = () => writeOciLayout([{ layers: [base], config: CONFIG }]);

  beforeAll(async () => {
    secured = await startRegistry({ tokenAuth: true });
    login = secured.login!;
    const image = layoutOnce();
    await pushLayout(image, secured, 'private/app:1');
    await pushLayout(image, secured, 'public/app:1');
  }, 60_000);

  afterAll(async () => {
    await secured?.stop();
  });

  it('pulls a public image anonymously through the bearer-token challenge', async () => {
    const r = await cli(['template', 'pull', 'anon', `${secured.host}/public/app:1`], env);
    expect(r.code).toBe(0);
    expect(existsSync(join(rootOf('anon'), 'bin/sh'))).toBe(true);
  });

  it('pulls a private image with --username and --password-stdin; a wrong password, or none, is refused naming the reference', async () => {
    const ref = `${secured.host}/private/app:1`;
    const wrong = await cli(
      ['template', 'pull', 'wrong', ref, '--username', login.username, '--password-stdin'],
      env,
      'not the password\n',
    );
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('permission_denied');
    expect(wrong.stderr).toContain(`The registry refused access to ${ref}`);
    expect(wrong.stderr).not.toContain('not the password');
    const anonymous = await cli(['template', 'pull', 'anonymous', ref], env);
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain(`The registry refused access to ${ref}`);
    for (const name of ['wrong', 'anonymous']) expect(readTemplate(store, name)).toBeUndefined();
    const right = await cli(
      ['template', 'pull', 'private', ref, '--username', login.username, '--password-stdin'],
      env,
      `${login.password}\n`,
    );
    expect(right.stderr.split('\n').filter((l) => /level=(error|fatal)/.test(l))).toEqual([]);
    expect(right.code).toBe(0);
    expect(readTemplate(store, 'private')!.image?.reference).toBe(ref);
    expect(existsSync(join(rootOf('private'), 'bin/sh'))).toBe(true);
  });

  it('takes the credentials from ~/.docker/config.json', async () => {
    const home = scratchDir('docker-home-');
    mkdirSync(join(home, '.docker'));
    const auth = Buffer.from(`${login.username}:${login.password}`).toString('base64');
    writeFileSync(join(home, '.docker/config.json'), JSON.stringify({ auths: { [secured.host]: { auth } } }), { mode: 0o600 });
    const r = await cli(['template', 'pull', 'fromconfig', `${secured.host}/private/app:1`], { ...env, HOME: home });
    expect(r.code).toBe(0);
    expect(existsSync(join(rootOf('fromconfig'), 'bin/sh'))).toBe(true);
  });
});

describe('sandboxes on an image template, through the built server and a real MCP client', () => {
  // A bound for a broken run: 18 s at most in 48 runs of the suite (3 s typically).
  it('runs and snapshots a sandbox on an image of 40 layers (its snapshot 41), and refuses one of more than 128', async () => {
    requireSandboxes();
    // Real images built with a RUN per step often have 40 or more layers. Each adds a file; the last removes the first's.
    const small = Array.from({ length: 39 }, (_, i) => packLayer(tree({ [`srv/f${i}`]: `${i}\n` })));
    small.push(packLayer(tree({ 'srv/.wh.f0': '' })));
    expect(
      (await cli(['template', 'import', 'tall', writeOciLayout([{ layers: [base, ...small], config: { Env: CONFIG.Env } }])], env)).code,
    ).toBe(0);
    if (isRoot) expect(readTemplate(store, 'tall')!.layers).toHaveLength(41);
    // Past docker's own bound of 128: refused naming the count, nothing made.
    const layersBefore = storeLayers().length;
    const tooTall = writeOciLayout([{ layers: [base, ...Array.from({ length: 128 }, () => small[1]!)], config: { Env: CONFIG.Env } }]);
    const refused = await cli(['template', 'import', 'too-tall', tooTall], env);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/^sandbox-mcp: unsupported: This image has 129 layers; a template stacks at most 128/);
    expect(storeLayers().length).toBe(layersBefore);
    expect(readTemplate(store, 'too-tall')).toBeUndefined();
    const server = await startHttp(env);
    const { client } = await server.connect();
    try {
      const sb = await ok(client, 'create_sandbox', { template: 'tall' });
      const listing = { command: 'ls /srv | wc -l; cat /srv/f38; ls /srv/f0 2>/dev/null || echo f0 gone' };
      expect(await ok(client, 'run_command', { sandbox_id: sb.sandbox_id, ...listing })).toMatchObject({
        exit_code: 0,
        stdout: '38\n38\nf0 gone\n',
      });
      await ok(client, 'write_file', { sandbox_id: sb.sandbox_id, path: '/srv/added', content: 'mine\n' });
      await ok(client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'tall-snap' });
      await ok(client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
      const again = await ok(client, 'create_sandbox', { template: 'tall-snap' });
      expect(await ok(client, 'run_command', { sandbox_id: again.sandbox_id, command: 'cat /srv/added /srv/f1' })).toMatchObject({
        exit_code: 0,
        stdout: 'mine\n1\n',
      });
      await ok(client, 'kill_sandbox', { sandbox_id: again.sandbox_id });
    } finally {
      await client.close();
      await server.stop();
    }
  }, 180_000);

  it('a sandbox sees the layers as the image says: whiteouts and opaque directories hide the lower files, a hard link across layers is one file, a removed bash is not its shell', async () => {
    requireSandboxes();
    // On top of base and top: a hard link to base's usr/bin/suid (a file of a lower layer).
    const linked = writeOciLayout([{ layers: [base, top, hardLinkLayer('usr/bin/linked2', 'usr/bin/suid')], config: CONFIG }]);
    expect((await cli(['template', 'import', 'stacked-under', layout], env)).code).toBe(0);
    const imported = await cli(['template', 'import', 'stacked', linked], env);
    expect(imported.stderr).toBe('');
    expect(imported.code).toBe(0);
    const record = readTemplate(store, 'stacked')!;
    if (isRoot) {
      expect(record.layers).toHaveLength(3);
      // The two layers under it are the ones a template of base and top lists.
      expect(record.layers.slice(1)).toEqual(readTemplate(store, 'stacked-under')!.layers);
      // The linked file was copied up into the new layer, and the link made to that copy.
      const topRoot = layerRoot(store, record.layers[0]!);
      expect(statSync(join(topRoot, 'usr/bin/linked2')).ino).toBe(statSync(join(topRoot, 'usr/bin/suid')).ino);
    }
    // An image whose upper layer removes bash: its commands get /bin/sh (the shell is looked for through the whiteout).
    const noBash = writeOciLayout([{ layers: [base, packLayer(tree({ 'usr/bin/.wh.bash': '' }))], config: { Env: CONFIG.Env } }]);
    expect((await cli(['template', 'import', 'nobash', noBash], env)).code).toBe(0);
    const server = await startHttp(env);
    const { client } = await server.connect();
    try {
      const shellless = await ok(client, 'create_sandbox', { template: 'nobash' });
      const bashGone = await ok(client, 'run_command', {
        sandbox_id: shellless.sandbox_id,
        command: 'ls /usr/bin/bash 2>/dev/null || echo no bash; ls /usr/bin/sh',
      });
      expect(bashGone).toMatchObject({ exit_code: 0, stdout: 'no bash\n/usr/bin/sh\n' });
      await ok(client, 'kill_sandbox', { sandbox_id: shellless.sandbox_id });
      const sb = await ok(client, 'create_sandbox', { template: 'stacked' });
      const id = sb.sandbox_id as string;
      const run = await ok(client, 'run_command', {
        sandbox_id: id,
        command:
          'cd /; ls -A /opt/old; ls /etc/doomed 2>/dev/null || echo no doomed; cat /etc/replaced /etc/planted; ' +
          'cat /usr/bin/linked2; [ "$(stat -c %i /usr/bin/linked2)" = "$(stat -c %i /usr/bin/suid)" ] && echo one file; stat -c %a /usr/bin/linked2',
      });
      expect(run).toMatchObject({ exit_code: 0, stdout: 'new\nno doomed\ntop\ninside\n#!/bin/sh\none file\n755\n' });
      await ok(client, 'kill_sandbox', { sandbox_id: id });
    } finally {
      await client.close();
      await server.stop();
    }
  }, 60_000);

  // An image with no node: the mini root, a program in a directory only the image's PATH names, and /app.
  const APP_CONFIG = { Env: ['FOO=from-image', 'PATH=/opt/tools/bin:/usr/bin:/bin'], WorkingDir: '/app' };

  it('Env and WorkingDir hold for commands and tasks (no node in the image), and in a sandbox from its snapshot, with a workspace and a writable root', async () => {
    requireSandboxes();
    const app = packLayer(
      tree({
        'app/README': 'app\n',
        'opt/tools/bin/greet': (path) => writeFileSync(path, '#!/bin/sh\necho "greet $FOO"\n', { mode: 0o755 }),
      }),
    );
    expect((await cli(['template', 'import', 'appimage', writeOciLayout([{ layers: [base, app], config: APP_CONFIG }])], env)).code).toBe(
      0,
    );
    // No `User`: root, as on any template.
    expect(readTemplate(store, 'appimage')!.image?.user_ids).toEqual({ uid: 0, gid: 0 });
    const workspace = tree({ 'hello.txt': 'hi\n' });
    const server = await startHttp({ ...env, SANDBOX_MCP_WORKSPACE_ALLOW: workspace });
    const { client } = await server.connect();
    try {
      const sb = await ok(client, 'create_sandbox', { template: 'appimage' });
      const id = sb.sandbox_id as string;
      const run = await ok(client, 'run_command', {
        sandbox_id: id,
        command: 'echo "$FOO"; pwd; greet; command -v node || echo no node; id -u',
      });
      expect(run).toMatchObject({ exit_code: 0, stdout: 'from-image\n/app\ngreet from-image\nno node\n0\n' });

      const task = await ok(client, 'start_task', { sandbox_id: id, command: 'echo "$FOO"; pwd; cat README' });
      let view = task;
      await waitFor(async () => {
        view = await ok(client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 5 });
        return view.state !== 'running';
      }, 'the task to finish');
      expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'from-image\n/app\napp\n' });

      await ok(client, 'write_file', { sandbox_id: id, path: '/app/note', content: 'written\n' });
      await ok(client, 'snapshot_sandbox', { sandbox_id: id, name: 'appsnap' });
      await ok(client, 'kill_sandbox', { sandbox_id: id });
      // From the snapshot, with a workspace (the default cwd now) and its root writable.
      const fromSnap = await ok(client, 'create_sandbox', { template: 'appsnap', workspace });
      const again = await ok(client, 'run_command', {
        sandbox_id: fromSnap.sandbox_id,
        command: 'echo "$FOO"; pwd; cat /app/note hello.txt; greet; echo edit > /usr/bin/edited && cat /usr/bin/edited; echo new > new.txt',
      });
      expect(again).toMatchObject({ exit_code: 0, stdout: 'from-image\n/workspace\nwritten\nhi\ngreet from-image\nedit\n' });
      const changes = await ok(client, 'workspace_changes', { sandbox_id: fromSnap.sandbox_id });
      expect((changes.changes as { change: string; path: string }[]).map((c) => `${c.change} ${c.path}`)).toEqual(['added new.txt']);
      expect(readdirSync(workspace)).toEqual(['hello.txt']);
      await ok(client, 'kill_sandbox', { sandbox_id: fromSnap.sandbox_id });
    } finally {
      await client.close();
      await server.stop();
    }
  }, 60_000);

  // An image whose User is `app` (uid 1000, gid 1001 in its own passwd and group; home /home/app, its own), with a file it may not write.
  const USER_CONFIG = { Env: ['PATH=/usr/bin:/bin'], User: 'app' };
  const userImageLayer = (): Buffer => {
    const mini = makeMiniRootDir();
    writeFileSync(join(mini, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n');
    writeFileSync(join(mini, 'etc/group'), 'root:x:0:\napp:x:1001:\n');
    mkdirSync(join(mini, 'home/app'), { recursive: true });
    execFileSync('chown', ['1000:1001', join(mini, 'home/app')]);
    writeFileSync(join(mini, 'etc/app.conf'), 'root only\n', { mode: 0o644 });
    return packLayer(mini);
  };

  // A bound for a broken run: 23 s at most in 48 runs of the suite (8 s typically).
  it.skipIf(!isRoot)(
    "runs commands, tasks, run_code and the shell as the image's User (ids, HOME, USER), and write_file as it; root's read-only files stay unwritable",
    async () => {
      requireSandboxes();
      const userLayer = userImageLayer();
      expect(
        (await cli(['template', 'import', 'userimage', writeOciLayout([{ layers: [userLayer], config: USER_CONFIG }])], env)).code,
      ).toBe(0);
      expect(readTemplate(store, 'userimage')!.image?.user_ids).toEqual({
        uid: 1000,
        gid: 1001,
        name: 'app',
        home: '/home/app',
        home_is_dir: true,
      });
      expect(JSON.parse((await cli(['template', 'inspect', 'userimage'], env)).stdout).user_note).toBeUndefined();
      // A User the root does not have: kept as null, and said so (its commands run as root).
      const nosuch = await cli(['template', 'import', 'nosuchuser', writeOciLayout([{ layers: [base], config: { User: 'nosuch' } }])], env);
      expect(nosuch.stdout).toMatch(/^note: The image's User names no user .*root inside\.$/m);
      expect(JSON.parse((await cli(['template', 'inspect', 'nosuchuser'], env)).stdout)).toMatchObject({
        image: { user_ids: null },
        user_note: expect.stringMatching(/names no user/),
      });
      const workspace = tree({ 'hello.txt': 'hi\n' });
      const server = await startHttp({ ...env, SANDBOX_MCP_WORKSPACE_ALLOW: workspace });
      const { client } = await server.connect();
      try {
        // With a workspace (the default cwd then), its files are the user's: it edits them and adds its own.
        const ws = (await ok(client, 'create_sandbox', { template: 'userimage', workspace })).sandbox_id as string;
        const inWs = await ok(client, 'run_command', {
          sandbox_id: ws,
          command: 'id -u; pwd; stat -c %u:%g . hello.txt; echo more >> hello.txt && echo new > new.txt && cat hello.txt',
        });
        expect(inWs).toMatchObject({ exit_code: 0, stdout: '1000\n/workspace\n1000:1001\n1000:1001\nhi\nmore\n' });
        const wsChanges = await ok(client, 'workspace_changes', { sandbox_id: ws });
        expect((wsChanges.changes as { change: string; path: string }[]).map((c) => `${c.change} ${c.path}`).sort()).toEqual([
          'added new.txt',
          'modified hello.txt',
        ]);
        expect(readFileSync(join(workspace, 'hello.txt'), 'utf8')).toBe('hi\n');
        await ok(client, 'kill_sandbox', { sandbox_id: ws });

        const id = (await ok(client, 'create_sandbox', { template: 'userimage' })).sandbox_id as string;
        const WHO = 'id -u; id -g; id -G; echo "$HOME $USER $LOGNAME"; pwd';
        const who = '1000\n1001\n1001\n/home/app app app\n/home/app\n';
        // The sandbox's resident runs the user's commands (`run_as`, protocol minor 9): the command's
        // parent is the resident (`serve`: a plain exec) or a supervisor of its (`supervise`), root
        // both, and a file of root's stays unwritable through each way.
        await waitFor(() => residentRecordOf(stateDir, id)?.resident, 'the resident to run');
        const AS_USER = `${WHO}; echo x 2>/dev/null >>/etc/app.conf || echo denied; tr '\\0' ' ' </proc/$PPID/cmdline; echo`;
        const expectAsUser = (r: Record<string, unknown>, parent: 'serve' | 'supervise') => {
          expect(r).toMatchObject({
            exit_code: 0,
            stdout: expect.stringMatching(new RegExp(`^${who}denied\\n.*agent[^ ]*\\.cjs ${parent}\\b.*\\n$`)),
          });
        };
        // The default background_after: a promotable exec, under a supervisor of the resident's.
        expectAsUser(await ok(client, 'run_command', { sandbox_id: id, command: AS_USER }), 'supervise');
        // background_after 0: a plain exec, the resident's child.
        expectAsUser(await ok(client, 'run_command', { sandbox_id: id, command: AS_USER, background_after: 0 }), 'serve');
        expect(await ok(client, 'run_command', { sandbox_id: id, command: WHO })).toMatchObject({ exit_code: 0, stdout: who });
        // The drop is real: a file of root's the image made read-only stays so, and root's home is closed.
        const denied = await ok(client, 'run_command', {
          sandbox_id: id,
          command: 'echo x >> /etc/app.conf; ls /home/user; cat /etc/app.conf',
        });
        expect(denied.exit_code).toBe(0);
        expect(denied.stdout).toBe('root only\n');
        expect(denied.stderr).toMatch(/app\.conf: Permission denied[\s\S]*\/home\/user.*Permission denied/);

        const task = await ok(client, 'start_task', { sandbox_id: id, command: AS_USER });
        let view = task;
        await waitFor(async () => {
          view = await ok(client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 5 });
          return view.state !== 'running';
        }, 'the task to finish');
        expectAsUser(view, 'supervise');
        expect(view.state).toBe('succeeded');
        // A call with background_after goes on as a task of the resident's, as the user too. It goes
        // on once the test has seen it promoted (a file says so), not after a fixed `sleep 3`: its
        // window starts after the start's first report, which a loaded machine delays.
        const promoted = await ok(client, 'run_command', {
          sandbox_id: id,
          command: `for i in $(seq 600); do [ -e /tmp/late.go ] && break; sleep 0.05; done; ${AS_USER}`,
          background_after: 1,
        });
        expect(promoted.backgrounded).toBe(true);
        await ok(client, 'write_file', { sandbox_id: id, path: '/tmp/late.go', content: '' });
        await waitFor(async () => {
          view = await ok(client, 'get_task', { sandbox_id: id, task_id: promoted.task_id, wait: 5 });
          return view.state !== 'running';
        }, 'the promoted call to finish');
        expect(view.state).toBe('succeeded');
        expectAsUser(view, 'supervise');
        // Agent calls are messages to the resident: counted in the sandbox's pid namespace (pids in
        // order), five get_task and a cancel start nothing once a supervisor of the resident's waits
        // (a per-call agent starts a shell and node, and node's threads, for each).
        const residentPid = residentRecordOf(stateDir, id)!.resident!.pid;
        const isBelowResident = (pid: number): boolean => {
          for (let p: number | null = ppidOf(pid); p !== null && p > 1; p = ppidOf(p)) if (p === residentPid) return true;
          return false;
        };
        const isWaiting = (pid: number): boolean => {
          try {
            return readlinkSync(`/proc/${pid}/cwd`) === '/';
          } catch {
            return false;
          }
        };
        await waitFor(
          () =>
            runningWith((argv) => argv.includes('supervise') && argv.includes('--warm')).some(
              (pid) => isBelowResident(pid) && isWaiting(pid),
            ),
          'a supervisor of the resident waiting',
        );
        const probe = async (command: string) =>
          (await ok(client, 'run_command', { sandbox_id: id, command, background_after: 0 })).stdout as string;
        const before = Number(await probe('echo $$'));
        for (let i = 0; i < 5; i++) await ok(client, 'get_task', { sandbox_id: id, task_id: task.task_id });
        await ok(client, 'cancel_task', { sandbox_id: id, task_id: task.task_id });
        expect(Number(await probe('echo $$')) - before).toBeLessThanOrEqual(2);
        expect(residentRecordOf(stateDir, id)).toMatchObject({ restarts: 0 });

        expect(await ok(client, 'run_code', { sandbox_id: id, language: 'bash', code: WHO })).toMatchObject({ exit_code: 0, stdout: who });

        // write_file writes as the user: its file is the user's; a file of root's is refused, and read as the user sees it.
        await ok(client, 'write_file', { sandbox_id: id, path: '/home/app/notes/a.txt', content: 'mine\n' });
        const owner = await ok(client, 'run_command', {
          sandbox_id: id,
          command: 'stat -c %u:%g notes notes/a.txt; echo more >> notes/a.txt',
        });
        expect(owner).toMatchObject({ exit_code: 0, stdout: '1000:1001\n1000:1001\n' });
        expect((await toolError(client, 'write_file', { sandbox_id: id, path: '/etc/app.conf', content: 'x' })).category).toBe(
          'permission_denied',
        );
        expect(await ok(client, 'read_file', { sandbox_id: id, path: '/etc/app.conf' })).toMatchObject({ content: 'root only\n' });
        expect((await toolError(client, 'list_files', { sandbox_id: id, path: '/home/user' })).category).toBe('permission_denied');
        // A relative path resolves against /home/user, root's: the refusal says so, and where to write instead.
        const relative = await toolError(client, 'write_file', { sandbox_id: id, path: 'main.py', content: 'x' });
        expect(relative).toMatchObject({
          category: 'permission_denied',
          suggestion: expect.stringMatching(/uid 1000.*\/home\/user.*\/home\/app/),
        });

        // The shell (a real pty, through the entry helper): the same ids and place.
        const term = spawnPty(process.execPath, [HOST_JS, 'shell', id, '--', 'sh', '-c', `${WHO}; echo END`], {
          cols: 100,
          rows: 30,
          env: serverEnv({ ...env, TERM: 'xterm' }),
        });
        let shown = '';
        term.onData((d) => (shown += d));
        const code = await new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)));
        expect(code).toBe(0);
        expect(shown.replaceAll('\r', '')).toContain(`${who}END\n`);
        // A snapshot keeps its parent's image: its sandboxes run as the same user, with what it wrote.
        await ok(client, 'snapshot_sandbox', { sandbox_id: id, name: 'usersnap' });
        await ok(client, 'kill_sandbox', { sandbox_id: id });
        const fromSnap = (await ok(client, 'create_sandbox', { template: 'usersnap' })).sandbox_id as string;
        expect(await ok(client, 'run_command', { sandbox_id: fromSnap, command: 'id -u; pwd; cat notes/a.txt' })).toMatchObject({
          exit_code: 0,
          stdout: '1000\n/home/app\nmine\nmore\n',
        });
        await ok(client, 'kill_sandbox', { sandbox_id: fromSnap });
      } finally {
        await client.close();
        await server.stop();
      }
    },
    180_000,
  );

  // A bound for a broken run: 18 s at most in 48 runs of the suite (4 s typically).
  it.skipIf(!isRoot)(
    "never sends the image's User's commands to a resident older than run_as: a sandbox an older server made runs them as the user through the entry helper and per-call agents",
    async () => {
      requireSandboxes();
      const userLayer = userImageLayer();
      const image = writeOciLayout([{ layers: [userLayer], config: USER_CONFIG }]);
      expect((await cli(['template', 'import', 'olduserimage', image], env)).code).toBe(0);
      // An older server makes the sandbox: its keeper keeps a resident of protocol minor 8.
      const old = await connectStdio(env, [], undefined, join(olderBuild(BEFORE_RUN_AS), 'host.js'));
      const id = (await ok(old.client, 'create_sandbox', { template: 'olduserimage', timeout: 600 })).sandbox_id as string;
      // A task keeps the sandbox past the older server's session.
      await ok(old.client, 'start_task', { sandbox_id: id, command: 'sleep 1' });
      await old.close();
      await waitFor(() => residentRecordOf(stateDir, id)?.resident, 'the resident to run');
      const s = await connectStdio(env);
      try {
        const WHO = "id -u; id -g; echo x 2>/dev/null >>/etc/app.conf || echo denied; tr '\\0' ' ' </proc/$PPID/cmdline; echo";
        // Neither the resident (serve) nor a supervisor it reuses (supervise --warm) is the parent: it was never asked.
        const asUserElsewhere = (out: unknown) => {
          expect(out).toMatch(/^1000\n1001\ndenied\n/);
          expect(out).not.toMatch(/\.cjs (serve|supervise --warm)\b/);
        };
        for (const backgroundAfter of [undefined, 0]) {
          const r = await ok(s.client, 'run_command', {
            sandbox_id: id,
            command: WHO,
            ...(backgroundAfter === undefined ? {} : { background_after: backgroundAfter }),
          });
          expect(r.exit_code).toBe(0);
          asUserElsewhere(r.stdout);
        }
        const task = await ok(s.client, 'start_task', { sandbox_id: id, command: WHO });
        let view = task;
        await waitFor(async () => {
          view = await ok(s.client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 5 });
          return view.state !== 'running';
        }, 'the task to finish');
        expect(view.state).toBe('succeeded');
        // A per-call agent's supervisor, started for this task (`supervise <its directory>`).
        asUserElsewhere(view.stdout);
        expect(view.stdout).toMatch(/\.cjs supervise \/\S+\/tasks\/[0-9a-f]{32} \n$/);
        await ok(s.client, 'kill_sandbox', { sandbox_id: id });
      } finally {
        await s.close();
      }
    },
    180_000,
  );

  it.skipIf(!isRoot)(
    "on a server that is not root (nobody) the image's User cannot exist: import says so, inspect too, and commands run as root inside",
    async () => {
      requireSandboxes();
      const nobodyState = scratchDir('sandbox-mcp-image-user-nobody-');
      chownSync(nobodyState, NOBODY.uid, NOBODY.gid);
      const nobodyEnv = { SANDBOX_MCP_STATE_DIR: nobodyState };
      const mini = makeMiniRootDir();
      writeFileSync(join(mini, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001:app:/home/app:/bin/sh\n');
      writeFileSync(join(mini, 'etc/group'), 'root:x:0:\napp:x:1001:\n');
      const layout = writeOciLayout([{ layers: [packLayer(mini)], config: { Env: ['PATH=/usr/bin:/bin'], User: 'app' } }]);
      execFileSync('chmod', ['-R', 'a+rX', layout]);
      try {
        const imported = await cli(['template', 'import', 'userimage', layout], nobodyEnv, undefined, NOBODY);
        expect(imported.code).toBe(0);
        expect(imported.stdout).toMatch(
          /^note: The image's User \(uid 1000\) cannot exist in a sandbox of a server that is not root.*root inside\.$/m,
        );
        const inspected = JSON.parse((await cli(['template', 'inspect', 'userimage'], nobodyEnv, undefined, NOBODY)).stdout);
        expect(inspected).toMatchObject({ owners: 'flattened', image: { user_ids: { uid: 1000, gid: 1001 } } });
        expect(inspected.user_note).toMatch(/server that is not root/);
        const server = await startHttp(nobodyEnv, [], NOBODY);
        const { client } = await server.connect();
        try {
          const id = (await ok(client, 'create_sandbox', { template: 'userimage' })).sandbox_id as string;
          expect(await ok(client, 'run_command', { sandbox_id: id, command: 'id -u; echo "$HOME"' })).toMatchObject({
            exit_code: 0,
            stdout: '0\n/home/user\n',
          });
          await ok(client, 'kill_sandbox', { sandbox_id: id });
        } finally {
          await client.close();
          await server.stop();
        }
      } finally {
        await destroyStateDir(nobodyState);
      }
    },
    180_000,
  );
});

describe('images on a server that is not root (flattened layers, user.overlay.opaque, whiteouts made without privileges)', () => {
  const runsAsRoot = isRootOrSkipping('a server running as nobody');
  const NOBODY = { uid: 65534, gid: 65534 };
  const nobodyState = scratchDir('sandbox-mcp-images-nobody-');
  const nobodyEnv = { SANDBOX_MCP_STATE_DIR: nobodyState };
  const nobodyStore = templatesDir(nobodyState);

  afterAll(() => rmSync(nobodyState, { recursive: true, force: true }));

  /** `template import` by the built bin as nobody, of a layout nobody can read. */
  function importAsNobody(name: string, image: string): Promise<CliResult> {
    execFileSync('chown', ['-R', `${NOBODY.uid}:${NOBODY.gid}`, image]);
    return new Promise((resolve) =>
      execFile(
        process.execPath,
        [hostJsReadableBy(NOBODY), 'template', 'import', name, image],
        { env: serverEnv(nobodyEnv), ...NOBODY, cwd: '/' },
        (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr }),
      ),
    );
  }

  it.runIf(runsAsRoot)(
    'shares the base between two images, and a sandbox sees whiteouts, opaque directories and apt told to stay root',
    async () => {
      requireSandboxes();
      chownSync(nobodyState, NOBODY.uid, NOBODY.gid);
      const apt = packLayer(tree({ 'etc/apt/apt.conf.d/00image': 'APT::Install-Recommends "false";\n' }));
      const one = await importAsNobody('flat-one', writeOciLayout([{ layers: [base, top], config: CONFIG }]));
      expect(one.stderr).toBe('');
      expect(one.code).toBe(0);
      expect((await importAsNobody('flat-two', writeOciLayout([{ layers: [base, apt], config: { Env: CONFIG.Env } }]))).code).toBe(0);
      const recOne = readTemplate(nobodyStore, 'flat-one')!;
      const recTwo = readTemplate(nobodyStore, 'flat-two')!;
      expect(recOne.owners).toBe('flattened');
      expect(recOne.layers).toHaveLength(2);
      expect(recTwo.layers[1]).toBe(recOne.layers[1]);
      const whiteout = lstatSync(join(layerRoot(nobodyStore, recOne.layers[0]!), 'etc/doomed'));
      expect(whiteout.isCharacterDevice() && whiteout.rdev === 0 && whiteout.uid === NOBODY.uid).toBe(true);
      expect(statSync(join(layerRoot(nobodyStore, recOne.layers[1]!), 'etc/replaced')).uid).toBe(NOBODY.uid);
      const s = await connectStdio(nobodyEnv, [], NOBODY);
      try {
        const sb = await ok(s.client, 'create_sandbox', { template: 'flat-one' });
        const seen = await ok(s.client, 'run_command', {
          sandbox_id: sb.sandbox_id,
          command:
            'ls -A /opt/old; ls /etc/doomed 2>/dev/null || echo no doomed; cat /etc/replaced; ls /etc/apt 2>/dev/null || echo no apt',
        });
        expect(seen).toMatchObject({ exit_code: 0, stdout: 'new\nno doomed\ntop\nno apt\n' });
        await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
        const sb2 = await ok(s.client, 'create_sandbox', { template: 'flat-two' });
        const apts = await ok(s.client, 'run_command', { sandbox_id: sb2.sandbox_id, command: 'cat /etc/apt/apt.conf.d/*' });
        expect(apts).toMatchObject({ exit_code: 0, stdout: 'APT::Install-Recommends "false";\nAPT::Sandbox::User "root";\n' });
        await ok(s.client, 'kill_sandbox', { sandbox_id: sb2.sandbox_id });
      } finally {
        await s.close();
      }
    },
    60_000,
  );
});
