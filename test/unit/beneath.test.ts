// Walking a tree a sandbox controls (host/util/beneath.ts): no name is ever followed as a symlink,
// a directory swapped for a symlink mid-walk stops the walk instead of leaving the tree, a FIFO is
// refused without blocking, and `..` or `/` never name an entry. Real files, a real FIFO, a real
// swapping process.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BeneathDir, BeneathError, entryNames } from '../../host/util/beneath.js';

const top = realpathSync(mkdtempSync(join(tmpdir(), 'beneath-')));
afterAll(() => rmSync(top, { recursive: true, force: true }));

// A tree `root` with root/d/inside.txt, and beside it `outside/inside.txt` holding a marker.
function tree(name: string): { root: string; outside: string } {
  const root = join(top, name, 'root');
  const outside = join(top, name, 'outside');
  mkdirSync(join(root, 'd'), { recursive: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(root, 'd', 'inside.txt'), 'inside');
  writeFileSync(join(outside, 'inside.txt'), 'HOST-MARKER');
  return { root, outside };
}

function readAt(root: string, relDir: string, name: string): string {
  return BeneathDir.openRoot(root).use((r) =>
    r.openPath(relDir).use((d) => {
      const { fd } = d.openFile(name);
      try {
        return readFileSync(fd, 'utf8');
      } finally {
        closeSync(fd);
      }
    }),
  );
}

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof BeneathError) return err.code;
    throw err;
  }
  return 'none';
}

describe('a walk beneath a root', () => {
  it('reads a file through real directories', () => {
    const { root } = tree('plain');
    expect(readAt(root, 'd', 'inside.txt')).toBe('inside');
  });

  it('refuses a symlinked directory on the way, and a symlinked file at the end', () => {
    const { root, outside } = tree('links');
    symlinkSync(outside, join(root, 'via'));
    symlinkSync(join(outside, 'inside.txt'), join(root, 'd', 'file-link'));
    expect(codeOf(() => readAt(root, 'via', 'inside.txt'))).toBe('symlink');
    expect(codeOf(() => readAt(root, 'd', 'file-link'))).toBe('symlink');
    // The link itself is still seen as a link, and its target read as text, never followed.
    const target = BeneathDir.openRoot(root).use((r) => r.readLink('via'));
    expect(target).toBe(outside);
  });

  it('refuses a FIFO without blocking, and names that leave the directory', () => {
    const { root } = tree('fifo');
    execFileSync('mkfifo', [join(root, 'd', 'pipe')]);
    expect(codeOf(() => readAt(root, 'd', 'pipe'))).toBe('not_regular');
    expect(codeOf(() => entryNames('d/../..'))).toBe('bad_name');
    expect(codeOf(() => entryNames('/etc'))).toBe('bad_name');
    expect(codeOf(() => BeneathDir.openRoot(root).use((r) => r.at('..')))).toBe('bad_name');
  });

  it('removes a symlink itself, never what it points at', () => {
    const { root, outside } = tree('remove');
    symlinkSync(outside, join(root, 'd', 'out'));
    BeneathDir.openRoot(root).use((r) => r.openPath('d').use((d) => d.remove('out')));
    expect(readFileSync(join(outside, 'inside.txt'), 'utf8')).toBe('HOST-MARKER');
    expect(codeOf(() => BeneathDir.openRoot(root).use((r) => r.openPath('out')))).toBe('not_found');
  });

  it('refuses an asynchronous fn in use (its descriptor would be closed at the first await), and useAsync keeps it open', async () => {
    const { root } = tree('async');
    expect(() => BeneathDir.openRoot(root).use(async () => 1)).toThrow(/useAsync/);
    const names = await BeneathDir.openRoot(root).useAsync(async (r) => {
      await new Promise((res) => setTimeout(res, 5));
      return r.names();
    });
    expect(names).toEqual(['d']);
  });

  it('never reads outside while a process swaps the directory for a symlink (bounded: 400 to 20000 walks)', async () => {
    const { root, outside } = tree('race');
    // The swapper: d moved away, a symlink to outside put in its place, then back, for at most 4000
    // rounds or until the stop file appears. Stopped that way and waited for, not killed: a killed
    // sh leaves its running mv or ln behind, which could write into the tree while afterAll removes
    // it (a full run once left this file's folder behind).
    const stop = join(top, 'race', 'stop');
    const swapper = spawn(
      'sh',
      [
        '-c',
        'i=0; while [ $i -lt 4000 ] && [ ! -e "$2" ]; do mv d d.real; ln -s "$1" d; rm d; mv d.real d; i=$((i+1)); done',
        'swap',
        outside,
        stop,
      ],
      { cwd: root, stdio: 'ignore' },
    );
    const swapperExited = new Promise((resolve) => swapper.once('exit', resolve));
    const seen = new Map<string, number>();
    try {
      // At least 400 walks, and on until one has read the real directory: on a busy machine the
      // swapper can sit in one state (d moved away, say) for all of 400 quick walks. It ends with d
      // real, so the walks that follow read it: the bound is never the reason a walk saw nothing.
      for (let i = 0; i < 20_000 && (i < 400 || !seen.has('inside')); i++) {
        let got: string;
        try {
          got = readAt(root, 'd', 'inside.txt');
        } catch (err) {
          got = err instanceof BeneathError ? `refused:${err.code}` : 'other-error';
        }
        seen.set(got, (seen.get(got) ?? 0) + 1);
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      writeFileSync(stop, '');
      await swapperExited;
    }
    expect([...seen.keys()].filter((k) => k.includes('HOST-MARKER'))).toEqual([]);
    expect(seen.get('inside') ?? 0).toBeGreaterThan(0);
  });
});
