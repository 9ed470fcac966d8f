// The workspace change computation (shared/workspace/): Myers' line diff and its hunks, the
// changes between two real trees — by walking both (an e2b copy) and through a real kernel overlay's
// upper directory (a local sandbox), which must agree — and the patch, which `git apply` must take
// and turn the old tree into the new one.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  lstatSync,
  readlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectChanges, treeReaders, type WorkspaceChange } from '../../shared/workspace/changes.js';
import { diffLines, splitLines, unifiedHunks, type DiffRun } from '../../shared/workspace/line-diff.js';
import { describeChanges, quotePath } from '../../shared/workspace/patch.js';

const top = realpathSync(mkdtempSync(join(tmpdir(), 'ws-changes-')));
afterAll(() => rmSync(top, { recursive: true, force: true }));

/** Applies runs to `a` (taking inserted lines from `b`): must give `b`. */
function replay(a: readonly string[], b: readonly string[], runs: readonly DiffRun[]): string[] {
  const out: string[] = [];
  let ai = 0;
  let bi = 0;
  for (const r of runs) {
    if (r.op === 'equal') {
      for (let i = 0; i < r.count; i++) {
        expect(a[ai + i]).toBe(b[bi + i]);
        out.push(a[ai + i]!);
      }
      ai += r.count;
      bi += r.count;
    } else if (r.op === 'delete') ai += r.count;
    else {
      out.push(...b.slice(bi, bi + r.count));
      bi += r.count;
    }
  }
  expect(ai).toBe(a.length);
  return out;
}

function editCount(runs: readonly DiffRun[]): number {
  return runs.filter((r) => r.op !== 'equal').reduce((n, r) => n + r.count, 0);
}

/** The smallest number of insertions and deletions, by the textbook LCS table. */
function minimalEdits(a: readonly string[], b: readonly string[]): number {
  const lcs = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      lcs[i]![j] = a[i] === b[j] ? lcs[i + 1]![j + 1]! + 1 : Math.max(lcs[i + 1]![j]!, lcs[i]![j + 1]!);
  return a.length + b.length - 2 * lcs[0]![0]!;
}

/** A deterministic pseudo-random source (mulberry32), so a failure can be replayed. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('line diffs', () => {
  it('splits text into lines that keep their newline, the last one possibly without', () => {
    expect(splitLines('')).toEqual([]);
    expect(splitLines('a\nb')).toEqual(['a\n', 'b']);
    expect(splitLines('a\n\nb\n')).toEqual(['a\n', '\n', 'b\n']);
  });

  it('finds a shortest edit script: 400 random pairs replay exactly and match the LCS bound', () => {
    const next = random(25);
    for (let round = 0; round < 400; round++) {
      const pick = () => Array.from({ length: Math.floor(next() * 14) }, () => 'abcd'[Math.floor(next() * 4)]! + '\n');
      const a = pick();
      const b = pick();
      const runs = diffLines(a, b);
      expect(replay(a, b, runs)).toEqual(b);
      expect(editCount(runs)).toBe(minimalEdits(a, b));
      for (let i = 1; i < runs.length; i++) expect(runs[i]!.op).not.toBe(runs[i - 1]!.op);
    }
  });

  it('beyond maxEdits replaces the differing middle whole, still replaying exactly', () => {
    const a = Array.from({ length: 50 }, (_, i) => `${i % 2 ? 'x' : i}\n`);
    const b = Array.from({ length: 50 }, (_, i) => `${i % 2 ? i : 'x'}\n`);
    const bounded = diffLines(a, b, 4);
    expect(replay(a, b, bounded)).toEqual(b);
    expect(editCount(bounded)).toBeGreaterThan(minimalEdits(a, b));
  });

  it('prints hunks as git does: 3 lines of context, merged when close, counts of 1 and 0 as git writes them', () => {
    const a = splitLines('1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n');
    const b = splitLines('1\nTWO\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n21\n');
    expect(unifiedHunks(a, b)).toBe('@@ -1,5 +1,5 @@\n 1\n-2\n+TWO\n 3\n 4\n 5\n@@ -18,3 +18,4 @@\n 18\n 19\n 20\n+21\n');
    expect(unifiedHunks([], splitLines('x'))).toBe('@@ -0,0 +1 @@\n+x\n\\ No newline at end of file\n');
    expect(unifiedHunks(splitLines('same\n'), splitLines('same\n'))).toBe('');
  });

  it('quotes paths as git does: plain ones as they are, others C-quoted', () => {
    expect(quotePath('a/', 'dir/with space.txt')).toBe('a/dir/with space.txt');
    expect(quotePath('b/', 'tab\there')).toBe('"b/tab\\there"');
    expect(quotePath('a/', 'é')).toBe('"a/\\303\\251"');
  });
});

/** The workspace as it is at create: text, binary, a script, links, nested directories and a repository's .git. */
function makeBase(dir: string): void {
  mkdirSync(join(dir, 'src', 'deep'), { recursive: true });
  mkdirSync(join(dir, 'docs'), { recursive: true });
  mkdirSync(join(dir, 'gone-dir', 'inner'), { recursive: true });
  mkdirSync(join(dir, 'redo'), { recursive: true });
  mkdirSync(join(dir, '.git', 'refs'), { recursive: true });
  writeFileSync(join(dir, '.git', 'HEAD'), 'ref: refs/heads/main\n');
  writeFileSync(join(dir, 'README.md'), Array.from({ length: 30 }, (_, i) => `line ${i}\n`).join(''));
  writeFileSync(join(dir, 'src', 'main.py'), 'print("hello")\n');
  writeFileSync(join(dir, 'src', 'deep', 'keep.txt'), 'unchanged\n');
  writeFileSync(join(dir, 'src', 'deep', 'touched.txt'), 'same content\n');
  writeFileSync(join(dir, 'run.sh'), '#!/bin/sh\necho run\n');
  writeFileSync(join(dir, 'image.bin'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 3]));
  writeFileSync(join(dir, 'to-delete.txt'), 'bye\n');
  writeFileSync(join(dir, 'to-link.txt'), 'will become a link\n');
  writeFileSync(join(dir, 'gone-dir', 'a.txt'), 'a\n');
  writeFileSync(join(dir, 'gone-dir', 'inner', 'b.txt'), 'b\n');
  writeFileSync(join(dir, 'redo', 'old.txt'), 'old\n');
  writeFileSync(join(dir, 'redo', 'kept.txt'), 'kept\n');
  writeFileSync(join(dir, 'no-newline.txt'), 'last line');
  symlinkSync('src/main.py', join(dir, 'link'));
}

/** What the sandbox does, as a shell script run in the workspace (the same in a copy and in an overlay). */
const SANDBOX_WORK = [
  'printf "line 0\\nline 1 changed\\n" > README.tmp && tail -n +3 README.md >> README.tmp && printf "line 30\\n" >> README.tmp && cat README.tmp > README.md && rm README.tmp',
  'printf "print(\\"hello, world\\")\\n" > src/main.py',
  'touch src/deep/touched.txt',
  'chmod +x run.sh',
  'printf "\\000\\001changed" > image.bin',
  'rm to-delete.txt',
  'rm to-link.txt && ln -s README.md to-link.txt',
  'rm -rf gone-dir',
  'rm -rf redo && mkdir redo && echo kept > redo/kept.txt',
  'mkdir -p new/dir && echo new > new/dir/file.txt && : > new/empty.txt',
  'printf "last line, still none" > no-newline.txt',
  'ln -sfn README.md link',
  'echo "ref: refs/heads/other" > .git/HEAD && echo x > .git/refs/new',
  'mkfifo a-fifo',
].join(' && ');

/** What the sandbox's work changes, by path and kind of change (the same whichever way it is found). */
const EXPECTED: [string, WorkspaceChange['change'], WorkspaceChange['kind']][] = [
  ['README.md', 'modified', 'file'],
  ['gone-dir', 'deleted', 'directory'],
  ['gone-dir/a.txt', 'deleted', 'file'],
  ['gone-dir/inner', 'deleted', 'directory'],
  ['gone-dir/inner/b.txt', 'deleted', 'file'],
  ['image.bin', 'modified', 'file'],
  ['link', 'modified', 'symlink'],
  ['new', 'added', 'directory'],
  ['new/dir', 'added', 'directory'],
  ['new/dir/file.txt', 'added', 'file'],
  ['new/empty.txt', 'added', 'file'],
  ['no-newline.txt', 'modified', 'file'],
  ['redo/old.txt', 'deleted', 'file'],
  ['run.sh', 'mode_changed', 'file'],
  ['src/main.py', 'modified', 'file'],
  ['to-delete.txt', 'deleted', 'file'],
  ['to-link.txt', 'deleted', 'file'],
  ['to-link.txt', 'added', 'symlink'],
];

const summary = (changes: readonly WorkspaceChange[]) => changes.map((c) => [c.path, c.change, c.kind]);

function sh(script: string, cwd: string): void {
  const r = spawnSync('sh', ['-c', script], { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`sh failed: ${r.stderr}`);
}

/** Every file, link and directory of a tree (but .git and fifos) with its content, target or mode. */
function snapshot(dir: string, rel = ''): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of readdirSync(join(dir, rel)).sort()) {
    if (name === '.git') continue;
    const p = join(rel, name);
    const st = lstatSync(join(dir, p));
    if (st.isSymbolicLink()) out[p] = `link:${readlinkSync(join(dir, p))}`;
    else if (st.isDirectory()) Object.assign(out, { [p]: 'dir' }, snapshot(dir, p));
    else if (st.isFile()) out[p] = `${(st.mode & 0o111) !== 0 ? 'x' : '-'}:${readFileSync(join(dir, p)).toString('base64')}`;
  }
  return out;
}

describe('the changes between two copies (walking both trees)', () => {
  const base = join(top, 'copy-base');
  const current = join(top, 'copy-current');
  beforeAll(() => {
    makeBase(base);
    cpSync(base, current, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
    sh(SANDBOX_WORK, current);
  });

  it('lists what was added, modified, deleted and re-moded, parents first, .git and fifos left out', () => {
    expect(summary(collectChanges({ base, current }))).toEqual(EXPECTED);
  });

  it('reports modes, sizes and kinds of each side', () => {
    const changes = collectChanges({ base, current });
    const byPath = (p: string, c?: string) => changes.find((x) => x.path === p && (c === undefined || x.change === c))!;
    expect(byPath('run.sh')).toMatchObject({ mode_before: '0644', mode_after: '0755', size: 19 });
    expect(byPath('to-delete.txt')).toMatchObject({ mode_before: '0644', mode_after: null, size: 4 });
    expect(byPath('new/dir')).toMatchObject({ mode_before: null, size: null });
    expect(byPath('to-link.txt', 'added')).toMatchObject({ kind: 'symlink', size: 'README.md'.length, link_target: 'README.md' });
    expect(byPath('to-link.txt', 'deleted')).toMatchObject({ kind: 'file', link_target: null });
  });

  it('trusts an equal size, mtime and mode in a full walk, and compares content where they differ', () => {
    const b = join(top, 'stat-base');
    const c = join(top, 'stat-current');
    mkdirSync(b);
    writeFileSync(join(b, 'f'), 'aaaa');
    writeFileSync(join(b, 'g'), 'aaaa');
    cpSync(b, c, { recursive: true, preserveTimestamps: true });
    // Rewritten with the same bytes: a new mtime, the same content.
    writeFileSync(join(c, 'g'), 'aaaa');
    utimesSync(join(c, 'g'), new Date(), new Date(Date.now() + 5000));
    expect(collectChanges({ base: b, current: c })).toEqual([]);
  });

  it('makes a patch that git apply takes, turning a copy of the old tree into the new one (binary files aside)', () => {
    const changes = collectChanges({ base, current });
    const {
      changes: described,
      patch,
      truncated,
    } = describeChanges(treeReaders({ base, current }), changes, true, {
      maxFileBytes: 1 << 20,
      maxPatchBytes: 1 << 20,
    });
    expect(truncated).toBe(false);
    expect(described.find((c) => c.path === 'image.bin')?.diff).toBe('binary');
    expect(described.find((c) => c.path === 'new')?.diff).toBe('none');
    expect(patch).toContain('diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n');
    expect(patch).toContain('\\ No newline at end of file\n');
    expect(patch).not.toContain('image.bin');
    const target = join(top, 'apply-copy');
    cpSync(base, target, { recursive: true, verbatimSymlinks: true });
    writeFileSync(join(top, 'changes.patch'), patch);
    const check = spawnSync('git', ['apply', '--check', join(top, 'changes.patch')], { cwd: target, encoding: 'utf8' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
    expect(spawnSync('git', ['apply', join(top, 'changes.patch')], { cwd: target }).status).toBe(0);
    // The binary file is listed, not inlined: carry it over as apply would.
    cpSync(join(current, 'image.bin'), join(target, 'image.bin'));
    // git apply leaves directories a deletion emptied: as removed in the sandbox, remove them here.
    rmSync(join(target, 'gone-dir'), { recursive: true, force: true });
    mkdirSync(join(target, 'new', 'dir'), { recursive: true });
    const expected = snapshot(current);
    delete expected['a-fifo'];
    expect(snapshot(target)).toEqual(expected);
  });

  it('cuts the patch before the first section that would cross the cap, and says so', () => {
    const changes = collectChanges({ base, current });
    const whole = describeChanges(treeReaders({ base, current }), changes, true, { maxFileBytes: 1 << 20, maxPatchBytes: 1 << 20 }).patch;
    const cut = describeChanges(treeReaders({ base, current }), changes, true, { maxFileBytes: 1 << 20, maxPatchBytes: 400 });
    expect(cut.truncated).toBe(true);
    expect(Buffer.byteLength(cut.patch)).toBeLessThanOrEqual(400);
    expect(whole.startsWith(cut.patch)).toBe(true);
    expect(cut.patch.endsWith('\n')).toBe(true);
    const small = describeChanges(treeReaders({ base, current }), changes, true, { maxFileBytes: 10, maxPatchBytes: 1 << 20 });
    expect(small.changes.find((c) => c.path === 'README.md')?.diff).toBe('too_large');
    expect(small.patch).not.toContain('diff --git a/README.md');
  });
});

/** Mounts a kernel overlay of `lower` in a private mount namespace, runs `work` in it and keeps it until killed. */
function overlayWith(lower: string, dir: string, work: string): Promise<{ proc: ChildProcess; upper: string; merged: string }> {
  mkdirSync(join(dir, 'rw'), { recursive: true });
  mkdirSync(join(dir, 'merged'), { recursive: true });
  const script = [
    'set -e',
    `mount -t tmpfs tmpfs "${dir}/rw"`,
    `mkdir "${dir}/rw/upper" "${dir}/rw/work"`,
    `mount -t overlay overlay -o lowerdir="${lower}",upperdir="${dir}/rw/upper",workdir="${dir}/rw/work",userxattr "${dir}/merged"`,
    `cd "${dir}/merged"`,
    work,
    'echo ready',
    'exec sleep 600',
  ].join('\n');
  // A user namespace of its own (root inside): the same as root or not, and nothing reaches the host's mounts.
  const proc = spawn('unshare', ['--user', '--map-root-user', '--mount', '--propagation', 'private', 'sh', '-c', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let err = '';
    proc.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    proc.stdout!.once('data', () =>
      resolve({ proc, upper: `/proc/${proc.pid}/root${dir}/rw/upper`, merged: `/proc/${proc.pid}/root${dir}/merged` }),
    );
    proc.once('exit', (code) => reject(new Error(`overlay set-up failed (${code}): ${err}`)));
  });
}

describe('the changes through an overlay (its upper directory)', () => {
  const base = join(top, 'overlay-base');
  const copy = join(top, 'overlay-copy');
  let mounted: Awaited<ReturnType<typeof overlayWith>>;
  beforeAll(async () => {
    makeBase(base);
    cpSync(base, copy, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
    sh(SANDBOX_WORK, copy);
    mounted = await overlayWith(base, join(top, 'overlay'), SANDBOX_WORK);
  });
  afterAll(() => {
    mounted?.proc.kill('SIGKILL');
  });

  it('finds exactly what walking a copy finds — whiteouts, an opaque directory, a touched but unchanged file', () => {
    // The upper holds a copy-up of the touched file: present, but not a change.
    expect(existsSync(join(mounted.upper, 'src', 'deep', 'touched.txt'))).toBe(true);
    const viaUpper = collectChanges({ base, current: mounted.merged, upper: mounted.upper });
    expect(summary(viaUpper)).toEqual(EXPECTED);
    expect(viaUpper).toEqual(collectChanges({ base, current: copy }));
  });

  it('leaves the lower directory as it was', () => {
    const fresh = join(top, 'fresh-base');
    makeBase(fresh);
    expect(snapshot(base)).toEqual(snapshot(fresh));
  });

  it('reports nothing for an overlay nobody wrote to', async () => {
    const quiet = await overlayWith(base, join(top, 'overlay-quiet'), 'cat README.md > /dev/null');
    try {
      expect(collectChanges({ base, current: quiet.merged, upper: quiet.upper })).toEqual([]);
    } finally {
      quiet.proc.kill('SIGKILL');
    }
  });
});

describe('file modes in a full walk', () => {
  it('reports a mode change alone when the content is the same', () => {
    const b = join(top, 'mode-base');
    const c = join(top, 'mode-current');
    mkdirSync(b);
    writeFileSync(join(b, 'x'), 'x');
    cpSync(b, c, { recursive: true, preserveTimestamps: true });
    chmodSync(join(c, 'x'), 0o600);
    expect(collectChanges({ base: b, current: c })).toEqual([
      { path: 'x', change: 'mode_changed', kind: 'file', mode_before: '0644', mode_after: '0600', size: 1, link_target: null },
    ]);
  });
});
