// resolveImageUser: the ids an image's `User` names, from the applied root's own /etc/passwd and
// /etc/group, never from a file a link in the image points at on the host.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveImageUser } from '../../host/providers/local/templates/images/image-user.js';

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
  const root = rootWith({
    passwd: '# accounts\nroot:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n',
    group: 'root:x:0:\napp:x:1001:\nstaff:x:50:\n',
  });

  it('is root for an empty User, and reads a name, a number, and either with a group from the image', () => {
    expect(resolveImageUser(root, '')).toEqual({ uid: 0, gid: 0 });
    expect(resolveImageUser(root, 'app')).toEqual({ uid: 1000, gid: 1001 });
    expect(resolveImageUser(root, '1000')).toEqual({ uid: 1000, gid: 1001 });
    expect(resolveImageUser(root, '4242')).toEqual({ uid: 4242, gid: 0 });
    expect(resolveImageUser(root, 'app:staff')).toEqual({ uid: 1000, gid: 50 });
    expect(resolveImageUser(root, '1000:7')).toEqual({ uid: 1000, gid: 7 });
  });

  it('is null for a user or group the root does not have, and for a malformed User', () => {
    expect(resolveImageUser(root, 'nosuch')).toBeNull();
    expect(resolveImageUser(root, 'app:nogroup')).toBeNull();
    expect(resolveImageUser(root, 'a:b:c')).toBeNull();
    expect(resolveImageUser(root, ':50')).toBeNull();
    expect(resolveImageUser(rootWith({}), 'app')).toBeNull();
  });

  it("never follows a link: an image's etc -> /etc, or passwd -> /etc/passwd, does not make the host's accounts answer", () => {
    const linkedEtc = mkdtempSync(join(scratch, 'root-'));
    symlinkSync('/etc', join(linkedEtc, 'etc'));
    const linkedPasswd = rootWith({});
    symlinkSync('/etc/passwd', join(linkedPasswd, 'etc', 'passwd'));
    // root is in every host's /etc/passwd: followed, either link would answer 0:0.
    for (const r of [linkedEtc, linkedPasswd]) expect(resolveImageUser(r, 'root')).toBeNull();
  });
});
