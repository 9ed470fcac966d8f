// `sandbox-mcp apply <id> [--worktree]`: the person takes a sandbox's workspace changes onto the
// host — never from the MCP side, where the agent sits. In a git repository they become one commit
// on a new branch `sandbox/<short id>` (apply-git.ts), leaving the working tree and the index as
// they are; with --worktree, or in a plain directory, the changed files are written into the
// directory itself, all or nothing: any path the host changed since create is refused, by name,
// before anything is written.
//
// What the sandbox reports is not trusted for where it writes: every path is checked (relative,
// no `.`/`..`/`.git` part), the host directory comes from the provider's own record, no host
// symlink is followed, and set-id bits are dropped.
import {
  chownSync,
  chmodSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import * as z from 'zod';
import { WORKSPACE_LIMITS } from '../../shared/protocol.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { readWorkspaceChanges, type ReportedChange } from '../tasks/workspace-changes.js';
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

/** Reads the changes and checks the paths; refuses a set it cannot take whole. */
async function readChanges(deps: Pick<ServerDeps, 'providers' | 'agent'>, sandbox: SandboxRef) {
  const provider = deps.providers.get(sandbox.provider);
  const report = await readWorkspaceChanges(provider, deps.agent, sandbox.id, { patch: false, maxEntries: WORKSPACE_LIMITS.maxEntries });
  if (report.changes_truncated) {
    throw refused(`more than ${WORKSPACE_LIMITS.maxEntries} changes: apply takes a workspace's changes whole, and cannot list these`);
  }
  const unsafe = report.changes.filter((c) => !isSafeRelativePath(c.path));
  if (unsafe.length > 0)
    throw refused(`the sandbox reported ${unsafe.length} path(s) that are not plain relative paths; nothing was applied`);
  return { provider, report };
}

/** Applies the sandbox's workspace changes (see the module comment); throws a ProviderError (conflict, code apply_refused, for a refusal). */
export async function applyWorkspace(
  deps: Pick<ServerDeps, 'providers' | 'agent'>,
  sandbox: SandboxRef,
  opts: { isWorktree: boolean },
): Promise<ApplyResult> {
  const { provider, report } = await readChanges(deps, sandbox);
  const { workspace } = report;
  const git = workspace.origin.git;
  if (git && !opts.isWorktree) {
    const content = await readNewContent(provider, sandbox.id, workspace, report.changes);
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
  const content = await readNewContent(provider, sandbox.id, workspace, report.changes);
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

/** The kind of what is at `path` (no symlink followed), or null. */
function lstatKind(path: string): 'file' | 'symlink' | 'directory' | 'other' | null {
  try {
    const st = lstatSync(path);
    return st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'directory' : st.isFile() ? 'file' : 'other';
  } catch {
    return null;
  }
}

/**
 * Writes the changes into `root`: deletions first (deepest first), then directories, then files and
 * symlinks (each written beside its place and renamed over it). Checks everything before the first
 * write: every parent on the way must be a directory (never a symlink) or be made by this apply.
 */
export function writeIntoDirectory(
  root: string,
  changes: readonly ReportedChange[],
  content: readonly NewContent[],
): { written: number; deleted: number } {
  const deletions = changes.filter((c) => c.change === 'deleted').sort((a, b) => b.path.length - a.path.length);
  const deletedPaths = new Set(deletions.map((c) => c.path));
  const newDirs = new Set(changes.filter((c) => c.change === 'added' && c.kind === 'directory').map((c) => c.path));
  // Plan: the parents of everything written must be directories, or become ones here.
  for (const item of [...content.map((c) => c.change.path), ...newDirs]) {
    for (let dir = dirname(item); dir !== '.'; dir = dirname(dir)) {
      const kind = lstatKind(join(root, dir));
      // Missing (made below), a directory, or what the sandbox replaced by one (deleted below).
      if (kind === null || kind === 'directory' || deletedPaths.has(dir)) continue;
      throw refused(`${dir} is a ${kind} on the host, where the sandbox has a directory; nothing was applied`);
    }
  }
  const owner = ownerToGive(root);
  let deleted = 0;
  for (const c of deletions) {
    const path = join(root, c.path);
    const kind = lstatKind(path);
    if (kind === null) continue;
    if (kind === 'directory') {
      // Only an emptied directory goes: what the host added there since stays.
      try {
        rmdirSync(path);
        deleted++;
      } catch {
        // Not empty.
      }
    } else {
      unlinkSync(path);
      deleted++;
    }
  }
  for (const dir of [...newDirs].sort()) makeDirectory(root, dir, owner);
  let written = 0;
  for (const c of content) {
    const path = join(root, c.change.path);
    let parent = dirname(c.change.path);
    if (parent !== '.') makeDirectory(root, parent, owner);
    else parent = '';
    const temporary = join(root, parent, `.sandbox-mcp-apply-${randomBytes(6).toString('hex')}`);
    if (c.change.kind === 'symlink') symlinkSync(c.data.toString('utf8'), temporary);
    else {
      writeFileSync(temporary, c.data, { mode: c.mode, flag: 'wx' });
      chmodSync(temporary, c.mode);
    }
    try {
      if (owner) chownLink(temporary, owner);
      // A directory in the way (a type change) was deleted above; anything else is replaced atomically.
      if (lstatKind(path) === 'directory') rmdirSync(path);
      renameSync(temporary, path);
    } catch (e) {
      rmSync(temporary, { force: true });
      throw e;
    }
    written++;
  }
  return { written, deleted };
}

/** As root in someone else's directory: the owner new files get (theirs, not root's). */
function ownerToGive(root: string): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const st = statSync(root);
  return st.uid === 0 ? null : { uid: st.uid, gid: st.gid };
}

function chownLink(path: string, owner: { uid: number; gid: number }): void {
  lchownSync(path, owner.uid, owner.gid);
}

/** Makes `rel` (and its parents) below `root` as directories, never through a symlink. */
function makeDirectory(root: string, rel: string, owner: { uid: number; gid: number } | null): void {
  let path = root;
  for (const part of rel.split('/')) {
    path = join(path, part);
    const kind = lstatKind(path);
    if (kind === 'directory') continue;
    if (kind !== null) throw refused(`${rel} cannot be made: a ${kind} is in the way; applying stopped part way`);
    mkdirSync(path, { mode: 0o755 });
    if (owner) chownSync(path, owner.uid, owner.gid);
  }
}

/** The line `apply` prints for people. */
export function applyLine(r: ApplyResult): string {
  if (r.mode === 'branch') {
    const ignored = r.ignored > 0 ? `; ${r.ignored} added file(s) git ignores left out` : '';
    return `${r.branch} (commit ${r.commit!.slice(0, 12)}): ${r.written} written, ${r.deleted} deleted${ignored}\nreview: git show ${r.branch}    take it: git merge ${r.branch}`;
  }
  return `${r.host_path}: ${r.written} written, ${r.deleted} deleted`;
}
