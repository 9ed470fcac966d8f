// The base template's /etc (rootfs/base-view.ts): which host entries it copies, on a fake /etc.
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { baseEtcEntries, fillBaseEtc } from '../../host/providers/local/rootfs/base-view.js';

describe("the base view's /etc", () => {
  const root = mkdtempSync(join(tmpdir(), 'base-etc-'));
  const etc = join(root, 'etc');
  const out = join(root, 'out');
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  for (const [path, text] of Object.entries({
    'nsswitch.conf': 'hosts: files dns\n',
    'ssl/certs/ca.pem': 'CERT\n',
    'ssl/private/host.key': 'KEY\n',
    shadow: 'root:$6$secret\n',
    'pip.conf': '[global]\nindex-url = https://user:token@example\n',
    gitconfig: '[credential]\nhelper = store\n',
    'java-17/security/java.security': 'x\n',
    hostname: 'the-host\n',
  })) {
    mkdirSync(join(etc, path, '..'), { recursive: true });
    writeFileSync(join(etc, path), text);
  }
  symlinkSync('/usr/share/zoneinfo/Etc/UTC', join(etc, 'localtime'));

  it('takes the listed entries and what /usr links to, never secrets or credentials, and only what exists', () => {
    const entries = baseEtcEntries(['java-17', 'ssl/private/host.key', 'shadow', 'not-there'], etc);
    expect(entries).toEqual(['java-17', 'localtime', 'nsswitch.conf', 'ssl/certs']);
  });

  it('copies them with its own host name, hosts and mount points for passwd and group', () => {
    fillBaseEtc(out, baseEtcEntries(['java-17'], etc), etc);
    expect(readFileSync(join(out, 'ssl/certs/ca.pem'), 'utf8')).toBe('CERT\n');
    expect(readFileSync(join(out, 'java-17/security/java.security'), 'utf8')).toBe('x\n');
    expect(readlinkSync(join(out, 'localtime'))).toBe('/usr/share/zoneinfo/Etc/UTC');
    expect(readFileSync(join(out, 'hostname'), 'utf8')).toBe('sandbox\n');
    expect(readFileSync(join(out, 'hosts'), 'utf8')).toMatch(/^127\.0\.0\.1\tlocalhost sandbox\n/);
    expect(readFileSync(join(out, 'passwd'), 'utf8')).toBe('');
    expect(readlinkSync(join(out, 'mtab'))).toBe('/proc/self/mounts');
    for (const gone of ['shadow', 'pip.conf', 'gitconfig', 'ssl/private']) expect(existsSync(join(out, gone)), gone).toBe(false);
  });
});
