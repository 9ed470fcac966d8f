// A workspace's changes as the workspace_changes answer has them — the first `maxEntries` listed,
// counts of all, and the patch when asked — from changes computed over the same trees. One
// assembly for the agent (its own trees) and the host (the trees it reads itself).
import type { WorkspaceChangesResult } from '../protocol.js';
import { WORKSPACE_LIMITS } from '../protocol.js';
import type { WorkspaceChange } from './changes.js';
import { describeChanges } from './patch.js';
import type { TreeReaders } from './tree-reader.js';

export interface ReportOpts {
  patch: boolean;
  maxEntries: number;
  maxPatchBytes: number;
}

/** The answer for `all` (every change, sorted by path), read from `trees`. */
export function reportChanges(trees: TreeReaders, all: readonly WorkspaceChange[], opts: ReportOpts): WorkspaceChangesResult {
  const counts = { added: 0, modified: 0, deleted: 0, mode_changed: 0 };
  for (const c of all) counts[c.change]++;
  const listed = all.slice(0, opts.maxEntries);
  const described = describeChanges(trees, listed, opts.patch, {
    maxFileBytes: WORKSPACE_LIMITS.maxFileBytes,
    maxPatchBytes: opts.maxPatchBytes,
  });
  return {
    changes: described.changes,
    changes_truncated: all.length > listed.length,
    counts,
    patch: opts.patch ? described.patch : null,
    // Changes past the listed ones are missing from the patch too.
    patch_truncated: opts.patch && (described.truncated || all.length > listed.length),
  };
}
