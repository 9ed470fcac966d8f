// The merged view of an image template's layers (images/layer-stack.ts's StackView), as the
// sandbox's overlay shows it: the top layer's files over the lower ones', whiteouts (0/0
// character devices) and opaque directories hiding what is under them, links followed inside the
// stack only. Read by the import for /bin/sh and for the image's User (resolveImageUser with a reader).
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveImageUser } from '../../host/providers/local/templates/images/image-user.js';
import { StackView, writeStackLayer, type StackLayer } from '../../host/providers/local/templates/images/layer-stack.js';
import { CopyMeta } from '../../host/providers/local/templates/copy-meta.js';
import { readHelper } from '../../host/providers/local/launch/perl-helpers.js';
import { findExecutable } from '../../host/providers/local/system/preflight.js';

/** The helpers' sources (copy-meta.pl makes the whiteouts and opaque marks). */
const HELPERS = join(dirname(fileURLToPath(import.meta.url)), '../../host/providers/local/helpers');

const scratch = mkdtempSync(join(tmpdir(), 'layer-stack-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const PASSWD = 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n';
const GROUP = 'root:x:0:\napp:x:1001:\nstaff:x:50:\n';

/** A layer holding `files` (relative path: text, or a function making it), with `opaque` directories. */
function layer(files: Record<string, string | ((path: string) => void)>, opaque: string[] = []): StackLayer {
  const root = mkdtempSync(join(scratch, 'layer-'));
  for (const [rel, content] of Object.entries(files)) {
    const path = join(root, rel);
    mkdirSync(dirname(path), { recursive: true });
    if (typeof content === 'string') writeFileSync(path, content);
    else content(path);
  }
  return { root, opaque: new Set(opaque) };
}

const whiteout = (path: string) => execFileSync('mknod', [path, 'c', '0', '0']);
const link = (target: string) => (path: string) => symlinkSync(target, path);

/** The ids `user` names in the stack (top first). */
function userIn(layers: StackLayer[], user: string) {
  const view = new StackView(layers);
  return resolveImageUser({ readEtc: (name) => view.readEtc('etc', name, 1 << 20), isDir: (path) => view.isRealDir(path) }, user);
}

describe('the merged view of a stack of layers', () => {
  const base = layer({ 'etc/passwd': PASSWD, 'etc/group': GROUP, 'usr/bin/sh': '#!', bin: link('usr/bin') });

  it('reads each account file from the topmost layer that shows it', () => {
    expect(userIn([layer({ 'etc/group': 'app:x:77:\n' }), base], 'app:app')).toMatchObject({ uid: 1000, gid: 77, name: 'app' });
    expect(userIn([layer({ 'srv/x': 'x' }), base], 'app:staff')).toMatchObject({ uid: 1000, gid: 50 });
  });

  it("says whether the user's home is a real directory of the merged view: not where a higher layer whited it out, nor through a link", () => {
    const withHome = layer({ 'home/app/.profile': '' });
    expect(userIn([layer({ 'srv/x': 'x' }), withHome, base], 'app')).toMatchObject({ home: '/home/app', home_is_dir: true });
    expect(userIn([layer({ 'home/app': whiteout }), withHome, base], 'app')).toMatchObject({ home_is_dir: false });
    expect(userIn([layer({ home: link('/root') }), withHome, base], 'app')).toMatchObject({ home_is_dir: false });
    expect(userIn([base], 'app')).toMatchObject({ home_is_dir: false });
  });

  it('hides what a whiteout or an opaque directory of a higher layer hides', () => {
    expect(userIn([layer({ 'etc/passwd': whiteout }), base], 'app')).toBeNull();
    // An opaque etc with only a group file: the base's passwd is gone.
    expect(userIn([layer({ 'etc/group': GROUP }, ['etc']), base], 'app')).toBeNull();
    // A whiteout of the whole etc in a middle layer hides it from the layers above too.
    expect(userIn([layer({ 'srv/y': 'y' }), layer({ etc: whiteout }), base], 'root')).toBeNull();
    // A file where the base has a directory: nothing under it shows.
    expect(userIn([layer({ etc: 'not a directory' }), base], 'root')).toBeNull();
  });

  it("never follows a link out of the stack for accounts: a layer's etc -> /etc or passwd -> /etc/passwd answers nothing", () => {
    // root is in every host's /etc/passwd: followed, either link would answer 0:0.
    expect(userIn([layer({ etc: link('/etc') }), base], 'root')).toBeNull();
    expect(userIn([layer({ 'etc/passwd': link('/etc/passwd') }), base], 'root')).toBeNull();
  });

  it("resolves a path through a lower layer's link inside the stack, finding a higher layer's file", () => {
    const top = layer({ 'usr/bin/sh': '#!/top' });
    const view = new StackView([top, base]);
    const found = view.resolve(['bin', 'sh'], true);
    expect(found?.parts).toEqual(['usr', 'bin', 'sh']);
    expect(found?.found.layer).toBe(0);
    // An absolute link is taken as if the stack were `/`, never the host's.
    const absolute = new StackView([layer({ sbin: link('/usr/bin') }), base]);
    expect(absolute.resolve(['sbin', 'sh'], true)?.found.layer).toBe(1);
    expect(absolute.resolve(['sbin', 'missing'], true)).toBeNull();
  });
});

describe('writing a layer on a stack', () => {
  const meta = new CopyMeta({
    perl: findExecutable('perl') ?? 'perl',
    text: readHelper(HELPERS, 'copy-meta'),
    arch: process.arch as 'x64',
  });
  afterAll(() => meta.close());

  /** A tar of `dir`'s members in order, then of `more`'s (appended: the same name may come twice). */
  function tarOf(dir: string, members: string[], more?: { dir: string; members: string[] }): Buffer {
    const file = join(mkdtempSync(join(scratch, 'tar-')), 'layer.tar');
    execFileSync('tar', ['-c', '-f', file, '-C', dir, '--numeric-owner', '--no-recursion', ...members]);
    if (more) execFileSync('tar', ['-r', '-f', file, '-C', more.dir, '--numeric-owner', '--no-recursion', ...more.members]);
    return readFileSync(file);
  }
  async function* chunks(buf: Buffer): AsyncGenerator<Buffer> {
    yield buf;
  }

  it('follows a link that replaced a directory earlier in the same layer, never the directory it saw before', async () => {
    const first = layer({ 'a/x': 'x' });
    const second = layer({ 'b/y': 'y', a: link('b') });
    const tar = tarOf(first.root, ['a', 'a/x'], { dir: second.root, members: ['b', 'a', 'a/y'] });
    const root = join(mkdtempSync(join(scratch, 'out-')), 'root');
    await writeStackLayer(root, [], chunks(tar), meta, process.geteuid?.() === 0 ? 'native' : 'flattened');
    expect(lstatSync(join(root, 'a')).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(root, 'b/y'), 'utf8')).toBe('y');
  });

  it('refuses a member whose path is longer than PATH_MAX before walking it (a deep path costs nothing to send)', async () => {
    /** A ustar header block: `name`, `type`, `size`. */
    const header = (name: string, type: string, size: number): Buffer => {
      const block = Buffer.alloc(512);
      block.write(name.slice(0, 99), 0, 'latin1');
      block.write('0000755\0', 100, 'latin1');
      block.write('0000000\0', 108, 'latin1');
      block.write('0000000\0', 116, 'latin1');
      block.write(size.toString(8).padStart(11, '0') + '\0', 124, 'latin1');
      block.write('00000000000\0', 136, 'latin1');
      block.write('        ', 148, 'latin1');
      block.write(type, 156, 'latin1');
      block.write('ustar  \0', 257, 'latin1');
      let sum = 0;
      for (const byte of block) sum += byte;
      block.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 'latin1');
      return block;
    };
    const deep = 'a/'.repeat(100_000) + 'f';
    const name = Buffer.from(deep + '\0');
    const tar = Buffer.concat([
      header('././@LongLink', 'L', name.length),
      name,
      Buffer.alloc((512 - (name.length % 512)) % 512),
      header('f', '0', 0),
      Buffer.alloc(1024),
    ]);
    const root = join(mkdtempSync(join(scratch, 'out-')), 'root');
    const refused = writeStackLayer(root, [], chunks(tar), meta, 'flattened');
    await expect(refused).rejects.toMatchObject({ code: 'layer_refused' });
    await expect(refused).rejects.toThrow(/longer than 4096 bytes/);
  });

  it('makes a directory opaque where the layer had whited it out, and hides the lower files under it', async () => {
    const lower = layer({ 'opt/a': 'a' });
    const src = layer({ '.wh.opt': '', 'opt/n': 'n' });
    const root = join(mkdtempSync(join(scratch, 'out-')), 'root');
    const written = await writeStackLayer(
      root,
      [lower],
      chunks(tarOf(src.root, ['.wh.opt', 'opt', 'opt/n'])),
      meta,
      process.geteuid?.() === 0 ? 'native' : 'flattened',
    );
    expect(written.opaqueDirs).toEqual(['opt']);
    const view = new StackView([{ root, opaque: new Set(written.opaqueDirs) }, lower]);
    expect(view.entry(['opt'], 'a')).toBeUndefined();
    expect(view.entry(['opt'], 'n')?.layer).toBe(0);
  });
});
