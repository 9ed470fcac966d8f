// `sandbox-mcp apply <id> [--worktree]`: the person takes a sandbox's workspace changes onto the
// host — never from the MCP side, where the agent sits. In a git repository they become one commit
// on a new branch `sandbox/<short id>` (apply-git.ts), leaving the working tree and the index as
// they are; with --worktree, or in a plain directory, the changed files are written into the
// directory itself, all or nothing: any path the host changed since create is refused, by name,
// before anything is written.
//
// Nothing the sandbox says is trusted: the changes are the host's own (tasks/workspace-changes.ts),
// the content written is what the host read itself, every path is checked (relative, no
// `.`/`..`/`.git` part), the host directory comes from the provider's own record, and every path
// touched — written, deleted, re-moded — is walked name by name from the directory's descriptor
// (util/beneath.ts): no host symlink is followed, a symlink the sandbox made is written as a
// symlink and never entered, and set-id bits are dropped.
import { fchmodSync, fchownSync, closeSync, lchownSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import * as z from 'zod';
import { WORKSPACE_LIMITS } from '../../shared/protocol.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { computeWorkspaceChanges, type ReportedChange } from '../tasks/workspace-changes.js';
import { BeneathDir, BeneathError, entryNames } from '../util/beneath.js';
import { isSafeRelativePath, readNewContent, refused, type NewContent } from './apply-content.js';
import { commitToBranch } from './apply-git.js';

/** What `apply --json` prints. */
export const ApplyResultSchema = z.strictObject({
  sandbox_id: z.string(),
  /** `branch`: a commit on a new branch; `directory`: files written into the directory. */
  mode: z.enum(['branch', 'directory']),
  host_path: z.string(),
  branch: z.string().nullable(),
  commit: z.string().nullable(),
  written: z.number(),
  deleted: z.number(),
  /** Added paths git ignores, left out of the commit. */
  ignored: z.number(),
});
export type ApplyResult = z.infer<typeof ApplyResultSchema>;

/** Reads the changes (the host's own) and the new content; refuses a set it cannot take whole. */
async function readChanges(deps: Pick<ServerDeps, 'providers' | 'agent'>, sandbox: SandboxRef) {
  const provider = deps.providers.get(sandbox.provider);
  const computed = await computeWorkspaceChanges(provider, deps.agent, sandbox.id, {
    patch: false,
    maxEntries: WORKSPACE_LIMITS.maxEntries,
  });
  try {
    const { report } = computed;
    if (report.changes_truncated) {
      throw refused(`more than ${WORKSPACE_LIMITS.maxEntries} changes: apply takes a workspace's changes whole, and cannot list these`);
    }
    const unsafe = report.changes.filter((c) => !isSafeRelativePath(c.path));
    if (unsafe.length > 0) throw refused(`the sandbox has ${unsafe.length} path(s) that are not plain relative paths; nothing was applied`);
    return { report, content: readNewContent(computed.trees.current, report.changes) };
  } finally {
    computed.close();
  }
}

/** Applies the sandbox's workspace changes (see the module comment); throws a ProviderError (conflict, code apply_refused, for a refusal). */
export async function applyWorkspace(
  deps: Pick<ServerDeps, 'providers' | 'agent'>,
  sandbox: SandboxRef,
  opts: { isWorktree: boolean },
): Promise<ApplyResult> {
  const { report, content } = await readChanges(deps, sandbox);
  const { workspace } = report;
  const git = workspace.origin.git;
  if (git && !opts.isWorktree) {
    const branch = `sandbox/${sandbox.id.slice(0, 12)}`;
    const made = await commitToBranch({ git, branch, sandbox, changes: report.changes, content });
    return {
      sandbox_id: sandbox.qualified,
      mode: 'branch',
      host_path: workspace.hostPath,
      branch,
      commit: made.commit,
      written: made.written,
      deleted: made.deleted,
      ignored: made.ignored,
    };
  }
  const conflicts = report.changes.filter((c) => c.host_changed);
  if (conflicts.length > 0) {
    const names = [...new Set(conflicts.map((c) => c.path))];
    throw refused(
      `the host changed ${names.length === 1 ? 'this file' : 'these files'} since the sandbox was created, so writing the sandbox's version would lose that change; nothing was applied:\n` +
        names.map((n) => `  ${n}`).join('\n'),
    );
  }
  const done = writeIntoDirectory(workspace.hostPath, report.changes, content);
  return {
    sandbox_id: sandbox.qualified,
    mode: 'directory',
    host_path: workspace.hostPath,
    branch: null,
    commit: null,
    ...done,
    ignored: 0,
  };
}

type Kind = 'file' | 'symlink' | 'directory' | 'other';

/** The kind of what is at `rel` below `root`, walked without following a symlink; null when it is not there (or not reachable without one). */
function kindAt(root: BeneathDir, rel: string): Kind | null {
  const st = root.lstatPath(rel);
  if (!st) return null;
  return st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
}

function parentOf(rel: string): string {
  const at = rel.lastIndexOf('/');
  return at < 0 ? '' : rel.slice(0, at);
}

function nameOf(rel: string): string {
  return rel.slice(rel.lastIndexOf('/') + 1);
}

/** Each directory above `rel`, nearest first ('' not included). */
function ancestors(rel: string): string[] {
  const out: string[] = [];
  for (let dir = parentOf(rel); dir !== ''; dir = parentOf(dir)) out.push(dir);
  return out;
}

/**
 * Writes the changes into `hostPath`: deletions first (deepest first), then directories, then
 * files and symlinks (each written beside its place and renamed over it). Checks everything before
 * the first write: every directory on the way to anything deleted or written must be a directory
 * (never a symlink, host's or sandbox's), or be made (or emptied and replaced) by this apply.
 */
export function writeIntoDirectory(
  hostPath: string,
  changes: readonly ReportedChange[],
  content: readonly NewContent[],
): { written: number; deleted: number } {
  let root: BeneathDir;
  try {
    root = BeneathDir.openRoot(hostPath);
  } catch {
    throw refused('the workspace directory is no longer a directory on the host; nothing was applied');
  }
  return root.use((dir) => writeBelow(dir, changes, content));
}

function writeBelow(
  root: BeneathDir,
  changes: readonly ReportedChange[],
  content: readonly NewContent[],
): { written: number; deleted: number } {
  const deletions = changes.filter((c) => c.change === 'deleted').sort((a, b) => b.path.length - a.path.length);
  const deletedPaths = new Set(deletions.map((c) => c.path));
  const newDirs = new Set(changes.filter((c) => c.change === 'added' && c.kind === 'directory').map((c) => c.path));
  // Plan: what lies on the way must be a directory, or become one here (missing: made below).
  for (const item of [...content.map((c) => c.change.path), ...newDirs, ...deletedPaths]) {
    for (const dir of ancestors(item)) {
      const kind = kindAt(root, dir);
      if (kind === null || kind === 'directory') continue;
      // What the sandbox replaced by a directory is deleted first — unless it is only on the way to a deletion.
      if (deletedPaths.has(dir) && !deletedPaths.has(item)) continue;
      throw refused(`${dir} is a ${kind} on the host, where the sandbox has a directory; nothing was applied`);
    }
  }
  const owner = ownerToGive(root);
  let deleted = 0;
  for (const c of deletions) {
    let parent: BeneathDir;
    try {
      parent = root.openPath(parentOf(c.path));
    } catch (e) {
      // Its directory is gone (deleted above, or by the host): nothing left to delete.
      if (e instanceof BeneathError && e.code === 'not_found') continue;
      throw refused(`${c.path} cannot be deleted: something on its way is not a directory; applying stopped part way`);
    }
    parent.use((dir) => {
      const st = dir.lstat(nameOf(c.path));
      if (!st) return;
      try {
        // A directory only when emptied: what the host added there since stays. A symlink goes itself.
        dir.remove(nameOf(c.path));
        deleted++;
      } catch {
        // Not empty.
      }
    });
  }
  for (const rel of [...newDirs].sort()) makeDirectory(root, rel, owner).close();
  let written = 0;
  for (const c of content) {
    const parentRel = parentOf(c.change.path);
    const name = nameOf(c.change.path);
    makeDirectory(root, parentRel, owner).use((dir) => {
      const temporary = `.sandbox-mcp-apply-${randomBytes(6).toString('hex')}`;
      try {
        if (c.change.kind === 'symlink') {
          dir.makeSymlink(c.data.toString('utf8'), temporary);
          if (owner) lchownSync(dir.at(temporary), owner.uid, owner.gid);
        } else {
          const fd = dir.createFile(temporary, c.mode);
          try {
            for (let at = 0; at < c.data.length;) at += writeSync(fd, c.data, at);
            fchmodSync(fd, c.mode);
            if (owner) fchownSync(fd, owner.uid, owner.gid);
          } finally {
            closeSync(fd);
          }
        }
        // A directory in the way (a type change) was emptied above; anything else is replaced atomically.
        if (dir.lstat(name)?.isDirectory()) dir.remove(name);
        dir.rename(temporary, name);
      } catch (e) {
        try {
          dir.remove(temporary);
        } catch {
          // Never made.
        }
        throw e;
      }
    });
    written++;
  }
  return { written, deleted };
}

/** As root in someone else's directory: the owner new files get (theirs, not root's). */
function ownerToGive(root: BeneathDir): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const st = root.lstatSelf();
  return st.uid === 0 ? null : { uid: st.uid, gid: st.gid };
}

/** Opens `rel` below `root`, making what is missing as directories, never through a symlink. */
function makeDirectory(root: BeneathDir, rel: string, owner: { uid: number; gid: number } | null): BeneathDir {
  let dir = root.reopen();
  try {
    for (const name of entryNames(rel)) {
      const st = dir.lstat(name);
      if (!st) {
        dir.makeDir(name, 0o755);
        if (owner) lchownSync(dir.at(name), owner.uid, owner.gid);
      } else if (!st.isDirectory()) {
        const kind = st.isSymbolicLink() ? 'symlink' : st.isFile() ? 'file' : 'special file';
        throw refused(`${rel} cannot be made: a ${kind} is in the way; applying stopped part way`);
      }
      const next = dir.openDir(name);
      dir.close();
      dir = next;
    }
  } catch (e) {
    dir.close();
    throw e;
  }
  return dir;
}

/** The line `apply` prints for people. */
export function applyLine(r: ApplyResult): string {
  if (r.mode === 'branch') {
    const ignored = r.ignored > 0 ? `; ${r.ignored} added file(s) git ignores left out` : '';
    return `${r.branch} (commit ${r.commit!.slice(0, 12)}): ${r.written} written, ${r.deleted} deleted${ignored}\nreview: git show ${r.branch}    take it: git merge ${r.branch}`;
  }
  return `${r.host_path}: ${r.written} written, ${r.deleted} deleted`;
}
