// workspace_changes: what the sandbox changed in its workspace (shared/workspace/), computed here,
// inside, as the sandbox user: whatever the trees hold (a link out of the workspace, a file it may
// not read) is read with no more rights than the sandbox has. Paths may start with `~/` (an e2b
// sandbox keeps its copy in the home, wherever the home is).
import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkspaceChangesResult } from '../../shared/protocol.js';
import { collectChangesFrom, treeReaders, type WorkspaceTrees } from '../../shared/workspace/changes.js';
import { reportChanges } from '../../shared/workspace/report.js';
import { AgentFailure } from '../errors.js';
import { homeDir } from '../paths.js';

export interface WorkspaceChangesOpts {
  base: string;
  current: string;
  upper?: string;
  patch: boolean;
  maxEntries: number;
  maxPatchBytes: number;
}

/** `~/x` in the agent's home; other paths as they are. */
function expandHome(path: string): string {
  if (!path.startsWith('~/')) return path;
  const home = homeDir();
  if (home === null)
    throw new AgentFailure('internal', 'a workspace path starts with ~/ but HOME is unset and this user has no home directory');
  return join(home, path.slice(2));
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** The changes (the first maxEntries by path), the counts of all of them and, when asked, the patch. */
export function workspaceChanges(opts: WorkspaceChangesOpts): WorkspaceChangesResult {
  const trees: WorkspaceTrees = { base: expandHome(opts.base), current: expandHome(opts.current) };
  if (opts.upper !== undefined) trees.upper = expandHome(opts.upper);
  for (const dir of [trees.base, trees.current, ...(trees.upper !== undefined ? [trees.upper] : [])]) {
    if (!isDirectory(dir)) throw new AgentFailure('not_found', 'the workspace, or the copy it is compared with, is not there');
  }
  const readers = treeReaders(trees);
  return reportChanges(readers, collectChangesFrom(readers), opts);
}
