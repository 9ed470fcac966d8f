// The README and docs/ link to each other by relative path and #anchor: every such link must
// resolve to a file of the repository and, with an anchor, to a heading of that file (GitHub's
// slugs), and docs/README.md must list every page under docs/. External URLs are not fetched.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const REPO = resolve(import.meta.dirname, '../..');

/** GitHub's anchor for a heading's text (github-slugger): lowercased, punctuation dropped, spaces to hyphens. */
export function githubSlug(heading: string): string {
  const text = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*_]{1,2}([^`*_]+)[`*_]{1,2}/g, '$1')
    .replace(/`/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Markdown without its fenced code blocks (headings and links there are neither). */
function unfenced(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '');
}

/** Markdown without its code: fenced blocks and inline spans (links there are not links). */
function prose(markdown: string): string {
  return unfenced(markdown).replace(/`[^`\n]*`/g, '');
}

/** The anchors a file's headings give, duplicates numbered as GitHub numbers them. */
export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of unfenced(markdown).matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) {
    const slug = githubSlug(m[1]!);
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Every relative link of `file` (repository-relative) that does not resolve, with why. */
export function brokenLinks(file: string, read: (path: string) => string | null = readRepoFile): string[] {
  const text = read(file);
  if (text === null) return [`${file}: not found`];
  const broken: string[] = [];
  for (const m of prose(text).matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
    const [path, anchor] = target.split('#', 2) as [string, string | undefined];
    const into = path === '' ? file : relative(REPO, resolve(REPO, dirname(file), decodeURIComponent(path)));
    const content = read(into);
    if (content === null) {
      broken.push(`${file}: ${target} (no such file)`);
      continue;
    }
    if (anchor !== undefined && !into.endsWith('.md')) broken.push(`${file}: ${target} (an anchor into a file that is not markdown)`);
    else if (anchor !== undefined && !anchorsOf(content).has(anchor)) broken.push(`${file}: ${target} (no such heading)`);
  }
  return broken;
}

/** A repository file's text; '' for a directory or a binary file that exists; null when missing. */
function readRepoFile(path: string): string | null {
  const full = join(REPO, path);
  if (path.startsWith('..') || !existsSync(full)) return null;
  return statSync(full).isFile() && full.endsWith('.md') ? readFileSync(full, 'utf8') : '';
}

const DOCS = readdirSync(join(REPO, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .sort();

describe('the documentation links', () => {
  it('resolve, file and #anchor, in the README and every page under docs/', () => {
    const files = ['README.md', ...DOCS.map((f) => `docs/${f}`)];
    expect(files.length).toBeGreaterThan(15);
    expect(files.flatMap((f) => brokenLinks(f))).toEqual([]);
  });

  it('are checked for real: a missing file, a missing heading and a heading inside code are each reported', () => {
    const pages: Record<string, string> = {
      'a.md': [
        '# Title',
        '## Commands longer than your `client`’s timeout',
        '## Title',
        '```',
        '## Not a heading',
        '```',
        'See [x](#title-1), [y](#commands-longer-than-your-clients-timeout), [z](b.md#nope), [w](c.md),',
        '[v](#not-a-heading), [u](#title), [t](https://example.com/#anything) and `[s](missing.md)`.',
      ].join('\n'),
      'b.md': '# B\n',
    };
    const read = (p: string) => pages[p] ?? null;
    expect(brokenLinks('a.md', read)).toEqual([
      'a.md: b.md#nope (no such heading)',
      'a.md: c.md (no such file)',
      'a.md: #not-a-heading (no such heading)',
    ]);
  });

  it('docs/README.md lists every page under docs/, each on a line of its own', () => {
    const index = readFileSync(join(REPO, 'docs/README.md'), 'utf8');
    const listed = [...index.matchAll(/^\| \[[^\]]+\]\(([a-z0-9-]+\.md)\) \| .+ \|$/gm)].map((m) => m[1]!).sort();
    expect(listed).toEqual(DOCS.filter((f) => f !== 'README.md'));
  });

  it('keep the README a first ten minutes: at most 400 lines', () => {
    expect(readFileSync(join(REPO, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(400);
  });
});
