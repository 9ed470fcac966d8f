// A snapshot's copy of a tree the sandbox controls (templates/layer-copy.ts's copyBeneath) when the
// sandbox removes or replaces an entry just as the copy reaches it: a removed entry is left out, a
// replaced one refuses the snapshot as the sandbox's change (conflict, snapshot_changed_while_copying,
// naming it), never as the server's failure. Real directories, the real copy-meta.pl helper; the
// sandbox's move is made deterministically at the exact moment, between the copy's lstat of the
// entry and its open or readlink, by a hook on the tree's root directory handle.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { readHelper } from '../../host/providers/local/launch/perl-helpers.js';
import { ProviderError } from '../../host/providers/provider-error.js';
import { findExecutable } from '../../host/providers/local/system/preflight.js';
import { CopyMeta } from '../../host/providers/local/templates/copy-meta.js';
import { copyBeneath } from '../../host/providers/local/templates/layer-copy.js';
import { BeneathDir } from '../../host/util/beneath.js';

/** The helpers' sources (copy-meta.pl copies extended attributes). */
const HELPERS = join(dirname(fileURLToPath(import.meta.url)), '../../host/providers/local/helpers');

const scratch = mkdtempSync(join(tmpdir(), 'layer-copy-'));
const meta = new CopyMeta({ perl: findExecutable('perl') ?? 'perl', text: readHelper(HELPERS, 'copy-meta'), arch: process.arch as 'x64' });
afterAll(() => {
  meta.close();
  rmSync(scratch, { recursive: true, force: true });
});

type Step = 'openFile' | 'openDir' | 'readLinkRaw';

/**
 * Copies the tree at `src` into a fresh directory (shown in messages as /home/user), doing
 * `sandboxMove` once, just before the copy's `step` on the entry `name` of the tree's root.
 */
async function copyWithMove(src: string, step: Step, name: string, sandboxMove: () => void): Promise<string> {
  const to = mkdtempSync(join(scratch, 'to-'));
  const root = BeneathDir.openRoot(src);
  let isMoved = false;
  const hooked = new Proxy(root, {
    get(target, key) {
      const value: unknown = Reflect.get(target, key, target);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (key === step && args[0] === name && !isMoved) {
          isMoved = true;
          sandboxMove();
        }
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  try {
    await copyBeneath(
      hooked,
      to,
      undefined,
      { ownerShift: 0, budget: { left: 1 << 30, overCap: () => new ProviderError('insufficient_resources') }, meta },
      '/home/user',
    );
  } finally {
    root.close();
  }
  expect(isMoved, `the copy reached ${step} of ${name}`).toBe(true);
  return to;
}

/** A tree holding `keep.txt` and the entry `name` made by `make`. */
function tree(name: string, make: (path: string) => void): string {
  const src = mkdtempSync(join(scratch, 'src-'));
  writeFileSync(join(src, 'keep.txt'), 'kept\n');
  make(join(src, name));
  return src;
}

/** What copyWithMove rejected with. */
async function refusalOf(copying: Promise<unknown>): Promise<ProviderError> {
  const err = await copying.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

describe('a snapshot copy when the sandbox removes or replaces an entry as the copy reaches it', () => {
  it('leaves out a file, a directory and a symlink removed between its lstat and its open or readlink', async () => {
    for (const [step, make, remove] of [
      ['openFile', (p: string) => writeFileSync(p, 'gone\n'), unlinkSync],
      ['openDir', (p: string) => mkdirSync(p), (p: string) => rmSync(p, { recursive: true })],
      ['readLinkRaw', (p: string) => symlinkSync('somewhere', p), unlinkSync],
    ] as const) {
      const src = tree('entry', make);
      const to = await copyWithMove(src, step, 'entry', () => remove(join(src, 'entry')));
      expect(readdirSync(to), step).toEqual(['keep.txt']);
      expect(readFileSync(join(to, 'keep.txt'), 'utf8')).toBe('kept\n');
    }
  });

  it('refuses as changed (naming it) a symlink replaced by a file, a file by a symlink or a directory, a directory by a file', async () => {
    const cases: [Step, (p: string) => void, (p: string) => void][] = [
      // readlink on what is no longer a symlink: EINVAL, the sandbox's change.
      ['readLinkRaw', (p) => symlinkSync('somewhere', p), (p) => (unlinkSync(p), writeFileSync(p, 'now a file\n'))],
      ['openFile', (p) => writeFileSync(p, 'file\n'), (p) => (unlinkSync(p), symlinkSync('/etc/passwd', p))],
      ['openFile', (p) => writeFileSync(p, 'file\n'), (p) => (unlinkSync(p), mkdirSync(p))],
      ['openDir', (p) => mkdirSync(p), (p) => (rmSync(p, { recursive: true }), writeFileSync(p, 'now a file\n'))],
    ];
    for (const [step, make, replace] of cases) {
      const src = tree('entry', make);
      const refused = await refusalOf(copyWithMove(src, step, 'entry', () => replace(join(src, 'entry'))));
      expect({ category: refused.category, code: refused.code }, step).toEqual({
        category: 'conflict',
        code: 'snapshot_changed_while_copying',
      });
      expect(refused.suggestion).toMatch(/^"\/home\/user\/entry" changed while the snapshot copied it/);
    }
  });
});
