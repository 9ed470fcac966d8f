// resolveImageUser: the ids an image's `User` names, from the applied root's own /etc/passwd and
// /etc/group, never from a file a link in the image points at on the host.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  imageUserPlan as imagePlan,
  resolveImageUser,
  treeReader,
  type ImageUserIds,
} from '../../host/providers/local/templates/images/image-user.js';

const scratch = mkdtempSync(join(tmpdir(), 'image-user-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A root whose /etc holds `files`. */
function rootWith(files: Record<string, string>): string {
  const root = mkdtempSync(join(scratch, 'root-'));
  mkdirSync(join(root, 'etc'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(root, 'etc', name), text);
  return root;
}

describe('resolveImageUser', () => {
  it('says whether the home is a real directory of the root, never following a link there', () => {
    const withHome = rootWith({ passwd: 'app:x:1000:1000::/home/app:/bin/sh\nlinked:x:1001:1001::/home/linked:/bin/sh\n' });
    mkdirSync(join(withHome, 'home/app'), { recursive: true });
    symlinkSync('/tmp', join(withHome, 'home/linked'));
    expect(resolveImageUser(treeReader(withHome), 'app')).toMatchObject({ home: '/home/app', home_is_dir: true });
    expect(resolveImageUser(treeReader(withHome), 'linked')).toMatchObject({ home: '/home/linked', home_is_dir: false });
  });

  const root = rootWith({
    passwd: '# accounts\nroot:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n',
    group: 'root:x:0:\napp:x:1001:\nstaff:x:50:\n',
  });

  it('is root for an empty User, and reads a name, a number, and either with a group from the image', () => {
    expect(resolveImageUser(treeReader(root), '')).toEqual({ uid: 0, gid: 0 });
    // Its name and home from passwd; the home is no directory in this root (none made).
    const app = { name: 'app', home: '/home/app', home_is_dir: false };
    expect(resolveImageUser(treeReader(root), 'app')).toEqual({ uid: 1000, gid: 1001, ...app });
    expect(resolveImageUser(treeReader(root), '1000')).toEqual({ uid: 1000, gid: 1001, ...app });
    // A number passwd does not list: no name, home `/` (as a container runtime gives it).
    expect(resolveImageUser(treeReader(root), '4242')).toEqual({ uid: 4242, gid: 0, home: '/', home_is_dir: true });
    expect(resolveImageUser(treeReader(root), 'app:staff')).toEqual({ uid: 1000, gid: 50, ...app });
    expect(resolveImageUser(treeReader(root), '1000:7')).toEqual({ uid: 1000, gid: 7, ...app });
    expect(resolveImageUser(treeReader(root), 'root')).toEqual({ uid: 0, gid: 0 });
  });

  it('is null for a user or group the root does not have, and for a malformed User', () => {
    expect(resolveImageUser(treeReader(root), 'nosuch')).toBeNull();
    expect(resolveImageUser(treeReader(root), 'app:nogroup')).toBeNull();
    expect(resolveImageUser(treeReader(root), 'a:b:c')).toBeNull();
    expect(resolveImageUser(treeReader(root), ':50')).toBeNull();
    expect(resolveImageUser(treeReader(rootWith({})), 'app')).toBeNull();
  });

  it("never follows a link: an image's etc -> /etc, or passwd -> /etc/passwd, does not make the host's accounts answer", () => {
    const linkedEtc = mkdtempSync(join(scratch, 'root-'));
    symlinkSync('/etc', join(linkedEtc, 'etc'));
    const linkedPasswd = rootWith({});
    symlinkSync('/etc/passwd', join(linkedPasswd, 'etc', 'passwd'));
    // root is in every host's /etc/passwd: followed, either link would answer 0:0.
    for (const r of [linkedEtc, linkedPasswd]) expect(resolveImageUser(treeReader(r), 'root')).toBeNull();
  });
});

describe('imageUserPlan', () => {
  const image = (user: string, ids: ImageUserIds | null) => ({ config: { user }, user_ids: ids });

  it("is the image's user only where a sandbox maps it (a root server's block), else root with a note saying why", () => {
    const app = { uid: 1000, gid: 1001, name: 'app', home: '/home/app', home_is_dir: true };
    expect(imagePlan(image('app', app), 'native')).toEqual({ user: app });
    expect(imagePlan(undefined, 'native')).toBeNull();
    expect(imagePlan(image('', { uid: 0, gid: 0 }), 'native')).toBeNull();
    expect(imagePlan(image('root', { uid: 0, gid: 0 }), 'native')).toBeNull();
    expect(imagePlan(image('app', app), 'flattened')).toEqual({ note: expect.stringMatching(/server that is not root.*root inside/) });
    expect(imagePlan(image('nosuch', null), 'native')).toEqual({ note: expect.stringMatching(/names no user.*root inside/) });
    expect(imagePlan(image('70000', { uid: 70000, gid: 0 }), 'native')).toEqual({ note: expect.stringMatching(/0-65535/) });
  });
});
