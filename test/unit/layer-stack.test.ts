// The merged view of an image template's layers (images/layer-stack.ts's StackView), as the
// sandbox's overlay shows it: the top layer's files over the lower ones', whiteouts (0/0
// character devices) and opaque directories hiding what is under them, links followed inside the
// stack only. Read by the import for /bin/sh and for the image's User (resolveImageUser with a reader).
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveImageUser } from '../../host/providers/local/templates/images/image-user.js';
import { StackView, type StackLayer } from '../../host/providers/local/templates/images/layer-stack.js';

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
  return resolveImageUser((name) => view.readEtc('etc', name, 1 << 20), user);
}

describe('the merged view of a stack of layers', () => {
  const base = layer({ 'etc/passwd': PASSWD, 'etc/group': GROUP, 'usr/bin/sh': '#!', bin: link('usr/bin') });

  it('reads each account file from the topmost layer that shows it', () => {
    expect(userIn([layer({ 'etc/group': 'app:x:77:\n' }), base], 'app:app')).toEqual({ uid: 1000, gid: 77 });
    expect(userIn([layer({ 'srv/x': 'x' }), base], 'app:staff')).toEqual({ uid: 1000, gid: 50 });
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
