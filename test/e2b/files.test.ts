// The e2b files part on a sandbox the SDK created in the fake: ranged reads, writes with parents,
// the append path (a temporary upload concatenated in the sandbox, then removed), listings.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { listFiles, readFile, writeFile } from '../../host/providers/e2b/files.js';
import { startSdkWorld, type SdkWorld } from '../support/e2b-sdk-world.js';

let world: SdkWorld;
let sandbox: Sandbox;
let home: string;

beforeAll(async () => {
  world = await startSdkWorld();
  sandbox = await world.newSandbox(300);
  home = world.fake.sandbox(sandbox.sandboxId)!.home;
});
afterAll(async () => {
  await world?.close();
});

/** Append uploads still in the fake's /tmp (the host's) that hold `marker`: the append must leave none. */
function leftoverUploads(marker: Buffer): string[] {
  return readdirSync('/tmp')
    .filter((n) => n.startsWith('.sandbox-mcp-append-'))
    .filter((n) => {
      try {
        return readFileSync(path.join('/tmp', n)).includes(marker);
      } catch {
        return false;
      }
    });
}

describe('e2b files', () => {
  test('write creates parents; read returns the requested range and the whole size', async () => {
    const data = randomBytes(50_000);
    expect(await writeFile(sandbox, '/home/user/a/b/c.bin', data)).toEqual({ size: data.length });
    expect(readFileSync(path.join(home, 'a/b/c.bin')).equals(data)).toBe(true);
    const whole = await readFile(sandbox, '/home/user/a/b/c.bin');
    expect(whole.data.equals(data)).toBe(true);
    const range = await readFile(sandbox, '/home/user/a/b/c.bin', { offset: 49_990, length: 100 });
    expect(range).toEqual({ data: data.subarray(49_990), size: data.length });
    expect(await readFile(sandbox, '/home/user/a/b/c.bin', { offset: 60_000 })).toEqual({ data: Buffer.alloc(0), size: data.length });
    expect(await readFile(sandbox, '/home/user/a/b/c.bin', { length: 0 })).toEqual({ data: Buffer.alloc(0), size: data.length });
    await expect(readFile(sandbox, '/home/user/a/b')).rejects.toMatchObject({ category: 'invalid_argument', code: 'IsADirectory' });
  });

  test('append concatenates in the sandbox, creating parents, and leaves no upload behind', async () => {
    const marker = randomBytes(16);
    const first = Buffer.concat([Buffer.from([0, 255, 10]), marker]);
    expect(await writeFile(sandbox, '/home/user/new/dir/log.bin', first, { append: true })).toEqual({ size: first.length });
    const second = Buffer.concat([marker, Buffer.from('\r\n')]);
    expect(await writeFile(sandbox, '/home/user/new/dir/log.bin', second, { append: true })).toEqual({
      size: first.length + second.length,
    });
    expect(readFileSync(path.join(home, 'new/dir/log.bin')).equals(Buffer.concat([first, second]))).toBe(true);
    expect(leftoverUploads(marker)).toEqual([]);
  });

  test('append outside the home, to a path with shell characters', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'e2b-files-test-'));
    try {
      const target = path.join(dir, `it's $HOME "q" $(x).txt`);
      await writeFile(sandbox, target, Buffer.from('one\n'), { append: true });
      expect(await writeFile(sandbox, target, Buffer.from('two\n'), { append: true })).toEqual({ size: 8 });
      expect(readFileSync(target, 'utf8')).toBe('one\ntwo\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('an append that cannot land fails with internal and still removes its upload', async () => {
    await writeFile(sandbox, '/home/user/adir/keep', Buffer.from('x'));
    const marker = randomBytes(16);
    await expect(writeFile(sandbox, '/home/user/adir', marker, { append: true })).rejects.toMatchObject({
      category: 'internal',
      code: 'ShellHelperFailed',
    });
    expect(leftoverUploads(marker)).toEqual([]);
  });

  test('list maps entry types and stops at maxEntries', async () => {
    await writeFile(sandbox, '/home/user/l/f.txt', Buffer.from('12345'));
    await writeFile(sandbox, '/home/user/l/sub/g.txt', Buffer.from('1'));
    symlinkSync('f.txt', path.join(home, 'l/link'));
    const entries = await listFiles(sandbox, '/home/user/l', { depth: 1, maxEntries: 100 });
    expect(entries.map((e) => [e.name, e.path, e.type]).sort()).toEqual([
      ['f.txt', '/home/user/l/f.txt', 'file'],
      ['link', '/home/user/l/link', 'symlink'],
      ['sub', '/home/user/l/sub', 'directory'],
    ]);
    expect(entries.find((e) => e.name === 'f.txt')).toMatchObject({ size: 5, modified_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    expect(await listFiles(sandbox, '/home/user/l', { depth: 2, maxEntries: 2 })).toHaveLength(2);
  });
});
