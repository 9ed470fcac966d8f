// What `apply` takes from a sandbox, whichever way it applies it: the new content of each changed
// file, from the trees the host itself read the changes from (a local sandbox's merged view walked
// without following symlinks, or an e2b sandbox's files the host downloaded) — never the agent's
// word — checked paths, and the refusal it answers with.
import type { TreeReader } from '../../shared/workspace/tree-reader.js';
import { ProviderError } from '../providers/provider-error.js';
import type { ReportedChange } from '../tasks/workspace-changes.js';

/** A refusal of `apply` that names what is in the way (exit 1). */
export function refused(detail: string): ProviderError {
  return new ProviderError('conflict', { code: 'apply_refused', detail });
}

/** True for a relative path apply may write: `/`-separated names, none empty, `.`, `..` or `.git`. */
export function isSafeRelativePath(path: string): boolean {
  if (path === '' || path.startsWith('/') || path.includes('\0')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..' && part !== '.git');
}

/** One file's new content, as apply writes or commits it. */
export interface NewContent {
  change: ReportedChange;
  /** The file's bytes, or a symlink's target. */
  data: Buffer;
  /** Permission bits to give it (set-id and sticky bits dropped). */
  mode: number;
}

const READ_CHUNK_BYTES = 1024 * 1024;

/** The whole regular file `rel` of `tree`; refuses one that is gone or no longer a regular file. */
function readWhole(tree: TreeReader, rel: string): Buffer {
  const file = tree.open(rel);
  if (!file) throw refused(`${rel}: the sandbox's file could not be read as a regular file (it changed meanwhile?); nothing was applied`);
  try {
    const parts: Buffer[] = [];
    for (;;) {
      const buf = Buffer.alloc(READ_CHUNK_BYTES);
      const n = file.read(buf, 0, buf.length);
      if (n === 0) return Buffer.concat(parts);
      parts.push(buf.subarray(0, n));
    }
  } finally {
    file.close();
  }
}

/** The new content of every file and symlink the sandbox added, modified or re-moded, read from `current` (the host's own reads). */
export function readNewContent(current: TreeReader, changes: readonly ReportedChange[]): NewContent[] {
  const out: NewContent[] = [];
  for (const change of changes) {
    if (change.change === 'deleted' || change.kind === 'directory') continue;
    const mode = parseInt(change.mode_after ?? '0644', 8) & 0o777;
    if (change.kind === 'symlink') {
      const target = current.readLink(change.path);
      if (target === null) throw refused(`${change.path}: the symlink's target could not be read; nothing was applied`);
      out.push({ change, data: Buffer.from(target, 'utf8'), mode });
    } else out.push({ change, data: readWhole(current, change.path), mode });
  }
  return out;
}
