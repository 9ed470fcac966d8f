// apply in a git repository: the sandbox's changes as one commit on a new branch, made with git's
// plumbing on a temporary index (GIT_INDEX_FILE) — read-tree of the commit HEAD named at create,
// the new blobs (hash-object), update-index, write-tree, commit-tree, update-ref — so the person's
// working tree, index and current branch are never touched: `git diff <head> sandbox/<id>` reviews
// it and `git merge` takes it. Added files git ignores stay out. As root in someone else's
// repository, git runs as the repository's owner, so nothing in it becomes root's.
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WorkspaceGit } from '../providers/provider.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import type { ReportedChange } from '../tasks/workspace-changes.js';
import { refused, type NewContent } from './apply-content.js';

interface GitRun {
  cwd: string;
  env: NodeJS.ProcessEnv;
  uid?: number;
  gid?: number;
}

/** Runs git and resolves with its stdout; rejects with a refusal naming the step (never git's text). */
function git(run: GitRun, args: readonly string[], input?: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      'git',
      ['-c', 'safe.directory=*', ...args],
      { cwd: run.cwd, env: run.env, maxBuffer: 64 * 1024 * 1024, ...(run.uid !== undefined ? { uid: run.uid, gid: run.gid } : {}) },
      (err, stdout) =>
        err
          ? reject(Object.assign(new Error(args[0]), { gitStep: args[0], stderr: String((err as { stderr?: unknown }).stderr ?? '') }))
          : resolve(stdout),
    );
    if (input !== undefined) child.stdin?.end(input);
  });
}

/** The made commit and what it holds. */
export interface BranchCommit {
  commit: string;
  written: number;
  deleted: number;
  ignored: number;
}

export interface BranchOpts {
  git: WorkspaceGit;
  branch: string;
  sandbox: SandboxRef;
  changes: readonly ReportedChange[];
  content: readonly NewContent[];
}

/** git's mode of new content: 120000 for a symlink, 100755 for any execute bit, else 100644. */
function gitMode(c: NewContent): string {
  if (c.change.kind === 'symlink') return '120000';
  return (c.mode & 0o111) !== 0 ? '100755' : '100644';
}

const ZERO_OID = '0'.repeat(40);

/** Commits the changes onto `branch` (which must not exist yet); see the module comment. */
export async function commitToBranch(opts: BranchOpts): Promise<BranchCommit> {
  const { git: repo } = opts;
  const owner = statSync(repo.top);
  const asOwner = process.getuid?.() === 0 && owner.uid !== 0 ? { uid: owner.uid, gid: owner.gid } : {};
  const scratch = mkdtempSync(join(tmpdir(), 'sandbox-mcp-apply-'));
  if (asOwner.uid !== undefined) chownSync(scratch, asOwner.uid, asOwner.gid!);
  const run: GitRun = {
    cwd: repo.top,
    env: { ...process.env, GIT_INDEX_FILE: join(scratch, 'index'), GIT_OPTIONAL_LOCKS: '0' },
    ...asOwner,
  };
  try {
    return await commitWith(run, scratch, opts);
  } catch (e) {
    const step = (e as { gitStep?: string }).gitStep;
    if (step !== undefined) throw refused(`git ${step} failed in ${repo.top}; nothing was changed but new objects in its object store`);
    throw e;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function commitWith(run: GitRun, scratch: string, opts: BranchOpts): Promise<BranchCommit> {
  const { git: repo } = opts;
  const exists = await git(run, ['rev-parse', '-q', '--verify', `refs/heads/${opts.branch}`]).then(
    () => true,
    () => false,
  );
  if (exists)
    throw refused(`the branch ${opts.branch} already exists: delete it (git branch -D ${opts.branch}) to apply again; nothing was changed`);
  if (repo.head) await git(run, ['read-tree', repo.head]);
  else await git(run, ['read-tree', '--empty']);
  // Added files git ignores (by the host's rules) are build output, not the change.
  const added = opts.content.filter((c) => c.change.change === 'added').map((c) => repo.prefix + c.change.path);
  const ignoredOut =
    added.length > 0 ? await git(run, ['check-ignore', '--no-index', '-z', '--stdin'], added.join('\0') + '\0').catch(() => '') : '';
  const ignored = new Set(ignoredOut.split('\0').filter(Boolean));
  const kept = opts.content.filter((c) => !ignored.has(repo.prefix + c.change.path));
  // The blobs: written to scratch files, hashed in one git call, raw (no filters: the sandbox's bytes).
  const files = kept.map((c, i) => {
    const file = join(scratch, `blob-${i}`);
    writeFileSync(file, c.data);
    if (run.uid !== undefined) chownSync(file, run.uid, run.gid!);
    return file;
  });
  const oids =
    files.length > 0
      ? (await git(run, ['hash-object', '-w', '--no-filters', '--stdin-paths'], files.join('\n') + '\n')).trim().split('\n')
      : [];
  const deletions = opts.changes.filter((c) => c.change === 'deleted' && c.kind !== 'directory');
  const lines = [
    ...deletions.map((c) => `0 ${ZERO_OID}\t${repo.prefix}${c.path}`),
    ...kept.map((c, i) => `${gitMode(c)} ${oids[i]}\t${repo.prefix}${c.change.path}`),
  ];
  if (lines.length > 0) await git(run, ['update-index', '-z', '--index-info'], lines.join('\0') + '\0');
  const tree = (await git(run, ['write-tree'])).trim();
  const message = [
    `Changes from sandbox ${opts.sandbox.qualified}`,
    '',
    `Its workspace was ${repo.prefix === '' ? 'the repository' : repo.prefix.replace(/\/$/, '')}; applied with sandbox-mcp apply.`,
    '',
  ].join('\n');
  const identity = await hasIdentity(run);
  const commitEnv = identity
    ? run.env
    : {
        ...run.env,
        GIT_AUTHOR_NAME: 'sandbox-mcp',
        GIT_AUTHOR_EMAIL: 'sandbox-mcp@localhost',
        GIT_COMMITTER_NAME: 'sandbox-mcp',
        GIT_COMMITTER_EMAIL: 'sandbox-mcp@localhost',
      };
  const commit = (
    await git({ ...run, env: commitEnv }, ['commit-tree', tree, ...(repo.head ? ['-p', repo.head] : []), '-F', '-'], message)
  ).trim();
  // The empty old value: only a branch that does not exist yet is made.
  await git(run, ['update-ref', '-m', `sandbox-mcp apply ${opts.sandbox.qualified}`, `refs/heads/${opts.branch}`, commit, '']);
  return { commit, written: kept.length, deleted: deletions.length, ignored: ignored.size };
}

/** True when git knows who the person is (user.name and user.email); else commits say sandbox-mcp. */
async function hasIdentity(run: GitRun): Promise<boolean> {
  try {
    await git(run, ['config', 'user.name']);
    await git(run, ['config', 'user.email']);
    return true;
  } catch {
    return false;
  }
}
