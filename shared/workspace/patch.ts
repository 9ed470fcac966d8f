// A unified diff of a workspace's changes in git's format (`diff --git` headers, new/deleted file
// and mode lines), so `git apply` and `patch -p1` take it. Text only: a binary file (a NUL byte,
// or bytes that are not UTF-8), one too large to diff, or one that cannot be read is listed by the
// changes, never inlined. The patch is capped; the files past the cap are left out whole.
import type { WorkspaceChange } from './changes.js';
import type { DiffState } from './contract.js';
import { splitLines, unifiedHunks } from './line-diff.js';
import { readUpTo, type TreeReader, type TreeReaders } from './tree-reader.js';

/** A change as reported: which of its content the patch shows. `none`: a directory. */
export type DescribedChange = WorkspaceChange & { diff: DiffState };

export interface PatchOpts {
  /** Files larger than this (on either side) are not diffed. */
  maxFileBytes: number;
  /** The patch's cap in bytes (of UTF-8); the section that would cross it and every later one are left out. */
  maxPatchBytes: number;
}

export interface WorkspacePatch {
  changes: DescribedChange[];
  /** The unified diff; '' when nothing textual changed. */
  patch: string;
  /** True when sections were left out to keep the patch within maxPatchBytes. */
  truncated: boolean;
}

type Content = { text: string } | { problem: Exclude<DiffState, 'inline' | 'none'> };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A file's text, or why it has none worth diffing. */
function readText(reader: TreeReader, rel: string, maxBytes: number): Content {
  const bytes = readUpTo(reader, rel, maxBytes);
  if (bytes === null) return { problem: 'unreadable' };
  if (bytes.length > maxBytes) return { problem: 'too_large' };
  // git's own test: a NUL in the first 8000 bytes makes a file binary.
  if (bytes.subarray(0, 8000).includes(0)) return { problem: 'binary' };
  try {
    return { text: utf8.decode(bytes) };
  } catch {
    return { problem: 'binary' };
  }
}

function readLinkText(reader: TreeReader, rel: string): Content {
  const target = reader.readLink(rel);
  return target === null ? { problem: 'unreadable' } : { text: target };
}

/** git's file mode of a change's side: 100644, 100755 (any execute bit) or 120000. */
function gitMode(change: WorkspaceChange, mode: string | null): string {
  if (change.kind === 'symlink') return '120000';
  return mode !== null && (parseInt(mode, 8) & 0o111) !== 0 ? '100755' : '100644';
}

/**
 * A path as git writes it in a patch: as is, unless it holds a byte git quotes (a control
 * character, `"`, `\`, or any non-ASCII byte), then C-quoted with octal escapes.
 */
export function quotePath(prefix: string, path: string): string {
  const full = prefix + path;
  const bytes = Buffer.from(full, 'utf8');
  if (!bytes.some((b) => b < 0x20 || b === 0x22 || b === 0x5c || b >= 0x7f)) return full;
  const named: Record<number, string> = {
    0x07: 'a',
    0x08: 'b',
    0x09: 't',
    0x0a: 'n',
    0x0b: 'v',
    0x0c: 'f',
    0x0d: 'r',
    0x22: '"',
    0x5c: '\\',
  };
  let out = '"';
  for (const b of bytes) {
    if (named[b] !== undefined) out += `\\${named[b]}`;
    else if (b < 0x20 || b >= 0x7f) out += `\\${b.toString(8).padStart(3, '0')}`;
    else out += String.fromCharCode(b);
  }
  return out + '"';
}

/** The content of one side of a change, or null for the side where it does not exist. */
function sideContent(trees: TreeReaders, change: WorkspaceChange, side: 'base' | 'current', maxBytes: number): Content | null {
  const exists = side === 'base' ? change.mode_before !== null : change.mode_after !== null;
  if (!exists) return null;
  const reader = side === 'base' ? trees.base : trees.current;
  return change.kind === 'symlink' ? readLinkText(reader, change.path) : readText(reader, change.path, maxBytes);
}

/** One file's section of the patch, or why it has none. */
function section(trees: TreeReaders, change: WorkspaceChange, opts: PatchOpts): { diff: DiffState; text: string } {
  if (change.kind === 'directory') return { diff: 'none', text: '' };
  const a = quotePath('a/', change.path);
  const b = quotePath('b/', change.path);
  let header = `diff --git ${a} ${b}\n`;
  const oldMode = gitMode(change, change.mode_before);
  const newMode = gitMode(change, change.mode_after);
  if (change.change === 'added') header += `new file mode ${newMode}\n`;
  else if (change.change === 'deleted') header += `deleted file mode ${oldMode}\n`;
  else if (oldMode !== newMode) header += `old mode ${oldMode}\nnew mode ${newMode}\n`;
  if (change.change === 'mode_changed') return { diff: oldMode !== newMode ? 'inline' : 'none', text: oldMode !== newMode ? header : '' };
  const before = sideContent(trees, change, 'base', opts.maxFileBytes);
  const after = sideContent(trees, change, 'current', opts.maxFileBytes);
  for (const side of [before, after]) if (side && 'problem' in side) return { diff: side.problem, text: '' };
  const oldText = before && 'text' in before ? before.text : '';
  const newText = after && 'text' in after ? after.text : '';
  const hunks = unifiedHunks(splitLines(oldText), splitLines(newText));
  // An empty file added or deleted has no hunks: the header alone says it.
  if (hunks === '') return { diff: 'inline', text: header };
  const from = change.change === 'added' ? '/dev/null' : a;
  const to = change.change === 'deleted' ? '/dev/null' : b;
  return { diff: 'inline', text: `${header}--- ${from}\n+++ ${to}\n${hunks}` };
}

/**
 * Describes `changes` (from collectChanges over the same `trees`) and, with `withPatch`, builds
 * their unified diff: sections in the changes' order until the next would cross maxPatchBytes.
 */
export function describeChanges(
  trees: TreeReaders,
  changes: readonly WorkspaceChange[],
  withPatch: boolean,
  opts: PatchOpts,
): WorkspacePatch {
  const described: DescribedChange[] = [];
  const parts: string[] = [];
  let bytes = 0;
  let truncated = false;
  for (const change of changes) {
    const s = section(trees, change, opts);
    described.push({ ...change, diff: s.diff });
    if (!withPatch || s.text === '' || truncated) {
      if (withPatch && s.text !== '') truncated = true;
      continue;
    }
    const size = Buffer.byteLength(s.text, 'utf8');
    if (bytes + size > opts.maxPatchBytes) {
      truncated = true;
      continue;
    }
    parts.push(s.text);
    bytes += size;
  }
  return { changes: described, patch: parts.join(''), truncated };
}
