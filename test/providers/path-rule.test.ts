// The provider contract's path rule on both providers: the same path names the same file or
// directory on a real local sandbox (bubblewrap) and on an e2b sandbox (the real `e2b` SDK against
// the in-repo fake), for writes, reads, listings and exec's working directory.
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProviderError } from '../../host/providers/provider-error.js';
import { createE2bProvider } from '../../host/providers/e2b/e2b-provider.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

// Outside the home on both providers: a private tmpfs locally, the host's /tmp behind the fake.
const TMP = `/tmp/sandbox-mcp-path-rule-${randomBytes(6).toString('hex')}`;

/** A path as a tool receives it, and the absolute sandbox path it must name. */
const FILE_CASES: [string, string][] = [
  ['~/pr/a.txt', '/home/user/pr/a.txt'],
  ['pr/b.txt', '/home/user/pr/b.txt'],
  ['./pr/c.txt', '/home/user/pr/c.txt'],
  ['~/pr/no-such-dir/../e.txt', '/home/user/pr/e.txt'],
  ['../user/pr/g.txt', '/home/user/pr/g.txt'],
  ['~//pr/h.txt', '/home/user/pr/h.txt'],
  ['pr/~/i.txt', '/home/user/pr/~/i.txt'],
  [`${TMP}/x/../j.txt`, `${TMP}/j.txt`],
];

/**
 * Paths for appends to files that do not exist yet, and the absolute path each must name. e2b
 * appends by a shell command that rewrites a home path as `$HOME/…`; these check that rewrite
 * (quotes, `$`, a literal `~`, the home's own prefix as a name) gives what the rule says.
 */
const NEW_APPEND_CASES: [string, string][] = [
  ['~/pr/new/k.txt', '/home/user/pr/new/k.txt'],
  ['pr/~/l.txt', '/home/user/pr/~/l.txt'],
  ['pr/sp ace $HOME "q".txt', '/home/user/pr/sp ace $HOME "q".txt'],
  [`${TMP}/y/../n.txt`, `${TMP}/n.txt`],
];

/** A directory path, the absolute path it must name, and a file known to be in it. */
const DIR_CASES: [string, string, string][] = [
  ['~', '/home/user', 'pr'],
  ['~/', '/home/user', 'pr'],
  ['.', '/home/user', 'pr'],
  ['pr', '/home/user/pr', 'a.txt'],
  ['./pr/', '/home/user/pr', 'a.txt'],
  ['~/pr/~/..', '/home/user/pr', 'a.txt'],
  ['../user/pr', '/home/user/pr', 'a.txt'],
  [TMP, TMP, 'j.txt'],
];

/** A working directory, and a file (relative to it) written above by the path given. */
const CWD_CASES: [string, string, string][] = [
  ['~', 'pr/a.txt', '~/pr/a.txt'],
  ['~/pr', 'a.txt', '~/pr/a.txt'],
  ['pr', 'b.txt', 'pr/b.txt'],
  ['./pr/../pr', 'c.txt', './pr/c.txt'],
  [`${TMP}/../..${TMP}`, 'j.txt', `${TMP}/x/../j.txt`],
];

/** The path-rule checks, run against one provider and one of its sandboxes. */
function pathRuleSuite(name: string, setUp: () => Promise<{ provider: Provider; sandboxId: string; tearDown: () => Promise<void> }>) {
  describe(`the path rule on the ${name} provider`, () => {
    let provider: Provider;
    let id: string;
    let tearDown: () => Promise<void> = async () => undefined;

    beforeAll(async () => {
      ({ provider, sandboxId: id, tearDown } = await setUp());
    });
    afterAll(async () => {
      await tearDown();
    });

    it('writes each path where the rule says and reads it back by either name', async () => {
      for (const [input, expected] of FILE_CASES) {
        const content = Buffer.from(`content of ${input}`);
        await provider.writeFile(id, input, content);
        expect((await provider.readFile(id, expected)).data.toString(), `${input} → ${expected}`).toBe(content.toString());
        expect((await provider.readFile(id, input)).data.toString(), input).toBe(content.toString());
      }
      // The literal `~` directory is a plain name inside pr/, not the home.
      const r = await provider.exec(id, 'cat "$HOME/pr/~/i.txt"', { timeoutS: 10 });
      expect(r.stdout.toString()).toBe('content of pr/~/i.txt');
    });

    it('lists the directory the rule names', async () => {
      for (const [input, expected, child] of DIR_CASES) {
        const paths = (await provider.listFiles(id, input, { depth: 1, maxEntries: 100 })).map((e) => e.path);
        expect(paths, input).toContain(`${expected}/${child}`);
        for (const p of paths) expect(p.startsWith(`${expected}/`), `${input}: ${p}`).toBe(true);
      }
    });

    it('runs commands in the working directory the rule names', async () => {
      for (const [cwd, file, writtenAs] of CWD_CASES) {
        const r = await provider.exec(id, `cat ${file}`, { timeoutS: 10, cwd });
        expect({ cwd, exitCode: r.exitCode, stdout: r.stdout.toString() }).toEqual({ cwd, exitCode: 0, stdout: `content of ${writtenAs}` });
      }
    });

    // Last of the content checks: the appends change what the cases above read.
    it('appends to the file the rule names, by any of its names', async () => {
      for (const [input, expected] of FILE_CASES) {
        const before = `content of ${input}`;
        const { size } = await provider.writeFile(id, input, Buffer.from('+appended'), { append: true });
        expect({ input, size }).toEqual({ input, size: Buffer.byteLength(before) + '+appended'.length });
        expect((await provider.readFile(id, expected)).data.toString(), `${input} → ${expected}`).toBe(`${before}+appended`);
      }
      for (const [input, expected] of NEW_APPEND_CASES) {
        await provider.writeFile(id, input, Buffer.from(`new ${input}`), { append: true });
        expect((await provider.readFile(id, expected)).data.toString(), `${input} → ${expected}`).toBe(`new ${input}`);
      }
    });

    it('refuses a NUL byte in any path as invalid_argument', async () => {
      const failures = [
        provider.writeFile(id, 'a\0b', Buffer.from('x')),
        provider.readFile(id, '~/a\0b'),
        provider.listFiles(id, '\0', { depth: 1, maxEntries: 10 }),
        provider.exec(id, 'true', { timeoutS: 10, cwd: 'a\0b' }),
      ];
      for (const f of failures) {
        const e: unknown = await f.then(
          () => undefined,
          (err: unknown) => err,
        );
        expect(isProviderError(e) && e.category).toBe('invalid_argument');
      }
    });
  });
}

describe('local', () => {
  pathRuleSuite('local', async () => {
    requireSandboxes();
    const stateDir = tempStateDir();
    const provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    const { sandbox_id: sandboxId } = await provider.create({ timeoutS: 300 });
    return {
      provider,
      sandboxId,
      tearDown: async () => {
        await provider.kill(sandboxId).catch(() => undefined);
        await provider.close();
        await destroyStateDir(stateDir);
      },
    };
  });
});

describe('e2b', () => {
  pathRuleSuite('e2b', async () => {
    const fake: FakeE2b = await startFakeE2b();
    const provider = createE2bProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl, killGraceS: 1 });
    const { sandbox_id: sandboxId } = await provider.create({ timeoutS: 300 });
    return {
      provider,
      sandboxId,
      tearDown: async () => {
        await provider.close();
        await fake.close();
        // The fake keeps paths outside the home on the host.
        rmSync(TMP, { recursive: true, force: true });
      },
    };
  });
});
