// What a workspace's host directory was at create (host/providers/workspace-origin.ts), kept
// without copying: the instant by the kernel's ctime clock, the names of each directory, the git
// repository and HEAD — and which changed paths the host changed since. Real files, real git.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { captureOrigin, findGit, hostChangedPaths, isNotBefore, recordNames } from '../../host/providers/workspace-origin.js';

const top = realpathSync(mkdtempSync(join(tmpdir(), 'ws-origin-')));
afterAll(() => rmSync(top, { recursive: true, force: true }));

function tree(name: string): string {
  const dir = join(top, name);
  mkdirSync(join(dir, 'src', 'deep'), { recursive: true });
  mkdirSync(join(dir, '.git', 'objects'), { recursive: true });
  for (const f of ['a.txt', 'b.txt', 'c.txt', 'd.txt', 'src/e.txt', 'src/deep/f.txt']) writeFileSync(join(dir, f), f);
  return dir;
}

describe('the names at create', () => {
  it('lists each directory, .git left out', () => {
    const dir = tree('names');
    const names = recordNames(dir);
    expect(names.isComplete).toBe(true);
    expect(Object.keys(names.dirs).sort()).toEqual(['', 'src', 'src/deep']);
    expect(names.dirs['']!.sort()).toEqual(['.git', 'a.txt', 'b.txt', 'c.txt', 'd.txt', 'src']);
  });

  it('stops at its bound and says it is incomplete', () => {
    expect(recordNames(tree('bounded'), 7)).toMatchObject({ isComplete: false });
  });
});

describe('host changes since create', () => {
  it('flags what the host wrote, re-moded, renamed over or deleted after create, and nothing else', async () => {
    const dir = tree('host');
    const names = recordNames(dir);
    const origin = await captureOrigin(dir, top);
    writeFileSync(join(dir, 'a.txt'), 'edited');
    chmodSync(join(dir, 'b.txt'), 0o600);
    writeFileSync(join(dir, 'c.new'), 'new c');
    renameSync(join(dir, 'c.new'), join(dir, 'c.txt'));
    rmSync(join(dir, 'd.txt'));
    // Timestamps can be set back; a ctime cannot.
    utimesSync(join(dir, 'a.txt'), new Date(0), new Date(0));
    const paths = ['a.txt', 'b.txt', 'c.txt', 'd.txt', 'src/e.txt', 'src/deep/f.txt', 'added.txt', 'new-dir/x.txt'];
    const changed = hostChangedPaths(
      dir,
      origin,
      paths.map((path) => ({ path })),
      names,
    );
    expect([...changed].sort()).toEqual(['a.txt', 'b.txt', 'c.txt', 'd.txt']);
  });

  it('does not count a deletion the host made too, nor an addition the change itself says was absent', async () => {
    const dir = tree('agree');
    const origin = await captureOrigin(dir, top);
    rmSync(join(dir, 'a.txt'));
    writeFileSync(join(dir, 'unrelated.txt'), 'x');
    const changed = hostChangedPaths(dir, origin, [
      { path: 'a.txt', isDeletion: true },
      { path: 'fresh.txt', existedAtCreate: false },
      { path: 'b.txt', existedAtCreate: true },
    ]);
    expect([...changed]).toEqual([]);
  });

  it('without the names, a missing path counts as changed when its nearest directory changed since', async () => {
    const dir = tree('no-names');
    const origin = await captureOrigin(dir, top);
    writeFileSync(join(dir, 'src', 'other.txt'), 'the person saved a file here');
    const changed = hostChangedPaths(dir, origin, [{ path: 'src/new.txt' }, { path: 'src/deep/new.txt' }, { path: 'gone/x.txt' }]);
    expect([...changed]).toEqual(['src/new.txt']);
  });

  it('compares a ctime without nanoseconds (a filesystem of whole seconds) by the second', () => {
    const since = 1_700_000_000_500_000_000n;
    expect(isNotBefore(1_700_000_000_000_000_000n, since)).toBe(true);
    expect(isNotBefore(1_699_999_999_000_000_000n, since)).toBe(false);
    expect(isNotBefore(1_700_000_000_400_000_001n, since)).toBe(false);
    expect(isNotBefore(1_700_000_000_500_000_000n + 1n, since)).toBe(true);
  });
});

describe('the repository at create', () => {
  const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();

  it('finds the top, the prefix of a directory below it and the commit HEAD names', async () => {
    const repo = join(top, 'repo');
    mkdirSync(join(repo, 'pkg', 'lib'), { recursive: true });
    git(repo, 'init', '-q', '-b', 'main');
    writeFileSync(join(repo, 'pkg', 'lib', 'x.txt'), 'x');
    git(repo, 'add', '.');
    git(repo, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'one');
    const head = git(repo, 'rev-parse', 'HEAD');
    expect(await findGit(repo)).toEqual({ top: repo, prefix: '', head });
    expect(await findGit(join(repo, 'pkg', 'lib'))).toEqual({ top: repo, prefix: 'pkg/lib/', head });
    expect((await captureOrigin(join(repo, 'pkg'), top)).git).toEqual({ top: repo, prefix: 'pkg/', head });
  });

  it('gives a null HEAD in a repository without commits, and none outside a repository', async () => {
    const empty = join(top, 'empty-repo');
    mkdirSync(empty);
    git(empty, 'init', '-q');
    expect(await findGit(empty)).toEqual({ top: empty, prefix: '', head: null });
    const plain = join(top, 'plain');
    mkdirSync(plain);
    expect(await findGit(plain)).toBeUndefined();
  });
});
