// The cache's prune (rootfs/cache-prune.ts) on a directory of this test's own: a hand-out refreshes
// an entry's time, a live mount in another mount namespace keeps an entry (a real one, made by
// unshare: its mount point is elsewhere, its root names the entry), and mounts that cannot be read
// keep everything, and an entry handed out while the prune runs is put back. The whole path through
// real servers and sandboxes: e2e/cache-prune.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cachedDir } from '../../host/providers/local/rootfs/cache-dir.js';
import { keysOfLiveMounts, pruneCacheEntries } from '../../host/providers/local/rootfs/cache-prune.js';
import { isRootOrSkipping, requireCommands } from '../support/prerequisites.js';
import { waitFor } from '../support/wait.js';

const DAY_MS = 24 * 60 * 60_000;

describe("the cache's prune", () => {
  const root = mkdtempSync(join(tmpdir(), 'cache-prune-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  let n = 0;

  /** A fresh cachedDir parent. */
  function parent(): string {
    const dir = join(root, `p${n++}`);
    mkdirSync(dir);
    return dir;
  }

  function entry(dir: string, key: string, ageMs: number): string {
    const path = join(dir, key);
    mkdirSync(path);
    writeFileSync(join(path, 'file'), 'x\n');
    const at = new Date(Date.now() - ageMs);
    utimesSync(path, at, at);
    return path;
  }

  it('counts a hand-out by cachedDir as a use: the entry it returned is not old', () => {
    const dir = parent();
    const path = entry(dir, '0123456789abcdef', 2 * DAY_MS);
    expect(cachedDir(dir, '0123456789abcdef', () => expect.unreachable('an existing entry is not made again'))).toBe(path);
    expect(Date.now() - statSync(path).mtimeMs).toBeLessThan(60_000);
    expect(pruneCacheEntries(dir).removed).toEqual([]);
    expect(existsSync(path)).toBe(true);
  });

  it('removes only old entries of its own name, not kept, and no others: a file by a key`s name, a kept one, a recent one stay', async () => {
    const dir = parent();
    const old = entry(dir, '00000000000000b1', 2 * DAY_MS);
    const kept = entry(dir, '00000000000000b2', 2 * DAY_MS);
    const recent = entry(dir, '00000000000000b3', DAY_MS - 60 * 60_000);
    writeFileSync(join(dir, '00000000000000b4'), 'a file\n');
    utimesSync(join(dir, '00000000000000b4'), new Date(0), new Date(0));
    const result = pruneCacheEntries(dir, { keep: ['00000000000000b2'] });
    expect(result).toMatchObject({ removed: ['00000000000000b1'], bound: [], isUnsure: false });
    // Gone from its name at once; its files (renamed to a .tmp- name) once `done` settles.
    expect(existsSync(old)).toBe(false);
    await result.done;
    expect(readdirSync(dir).sort()).toEqual(['00000000000000b2', '00000000000000b3', '00000000000000b4']);
    expect([existsSync(old), existsSync(kept), existsSync(recent), existsSync(join(dir, '00000000000000b4'))]).toEqual([
      false,
      true,
      true,
      true,
    ]);
  });

  it('removes nothing when a live process`s mounts cannot be read', () => {
    const dir = parent();
    const old = entry(dir, '00000000000000c1', 2 * DAY_MS);
    // A "process" whose mountinfo is a directory: EISDIR, not a process that ended.
    const proc = join(root, 'proc');
    mkdirSync(join(proc, '1', 'mountinfo'), { recursive: true });
    expect(keysOfLiveMounts(proc)).toBeNull();
    expect(pruneCacheEntries(dir, { procDir: proc })).toMatchObject({ removed: [], bound: [], isUnsure: true });
    expect(existsSync(old)).toBe(true);
  });

  it('puts an entry back when it was handed out between the look at its time and its removal', async () => {
    const dir = parent();
    const old = entry(dir, '00000000000000f1', 2 * DAY_MS);
    // The one "process" of a fake /proc has a FIFO for mountinfo: the prune reads it after looking
    // at the entry's time and before renaming it away. The writer, once the prune has opened it,
    // sets the entry's time as a hand-out does (touch), then closes it: no mounts.
    const proc = join(root, 'proc-fifo');
    mkdirSync(join(proc, '1'), { recursive: true });
    execFileSync('mkfifo', [join(proc, '1/mountinfo')]);
    const writer = spawn('sh', ['-c', 'exec 3>"$0" && touch "$1" && exec 3>&-', join(proc, '1/mountinfo'), old], { stdio: 'inherit' });
    const result = pruneCacheEntries(dir, { procDir: proc });
    await new Promise((resolve) => writer.once('exit', resolve));
    expect(result).toMatchObject({ removed: [], bound: [], isUnsure: false });
    expect(existsSync(join(old, 'file'))).toBe(true);
    expect(Date.now() - statSync(old).mtimeMs).toBeLessThan(60_000);
    expect(readdirSync(dir)).toEqual(['00000000000000f1']);
  });

  // A mount namespace of its own needs root.
  const asRoot = isRootOrSkipping('the live-mount case of the cache prune');

  it.skipIf(!asRoot)(
    'keeps an old entry that a live process in another mount namespace binds elsewhere, until that process ends',
    async () => {
      requireCommands(['unshare', 'mount']);
      const dir = parent();
      const bound = entry(dir, '00000000000000d1', 2 * DAY_MS);
      const at = join(root, 'mount-point');
      mkdirSync(at);
      const holder: ChildProcess = spawn(
        'unshare',
        ['-m', '--propagation', 'private', 'sh', '-c', 'mount --bind "$0" "$1" && echo ready && exec sleep 600', bound, at],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      try {
        await new Promise<void>((resolve, reject) => {
          holder.stdout!.once('data', () => resolve());
          holder.once('exit', (code) => reject(new Error(`unshare exited with ${code}`)));
        });
        const result = pruneCacheEntries(dir);
        expect(result).toMatchObject({ removed: [], bound: ['00000000000000d1'], isUnsure: false });
        expect(existsSync(join(bound, 'file'))).toBe(true);
      } finally {
        holder.kill('SIGKILL');
      }
      await waitFor(() => !keysOfLiveMounts()!.has('00000000000000d1'), 'the holder`s mount to go');
      expect(pruneCacheEntries(dir).removed).toEqual(['00000000000000d1']);
      expect(existsSync(bound)).toBe(false);
    },
  );
});
