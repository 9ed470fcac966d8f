// A sandbox's workspace changes as the host reports them, for the workspace_changes tool and the
// person's `diff` and `apply`, computed by the host from what it reads itself — never the agent's
// list or patch (shared/workspace/ does the comparison): a local sandbox's overlay upper and merged
// view are read on the host, one name at a time without following a symlink (util/beneath-tree.ts),
// against the person's directory (the overlay's lower, live); an e2b sandbox's agent only nominates
// paths, whose files the host downloads (workspace-nominated.ts). Beside each change, the host's own
// verdict from its record at create — did the person's file change since? — which the sandbox can
// neither see nor fake.
import { WORKSPACE_LIMITS, type WorkspaceChangesResult } from '../../shared/protocol.js';
import { collectChangesAt, collectChangesFrom } from '../../shared/workspace/changes.js';
import { reportChanges } from '../../shared/workspace/report.js';
import type { TreeReaders } from '../../shared/workspace/tree-reader.js';
import { ProviderError } from '../providers/provider-error.js';
import type { Provider, SandboxWorkspace } from '../providers/provider.js';
import { hostChangedPaths, readNames } from '../providers/workspace-origin.js';
import { BeneathError } from '../util/beneath.js';
import { beneathTreeReader, type BeneathTreeReader } from '../util/beneath-tree.js';
import type { AgentClient } from './agent-client.js';
import { downloadNominated } from './workspace-nominated.js';

/** One change with the host's verdict. */
export type ReportedChange = WorkspaceChangesResult['changes'][number] & {
  /** The host's file at this path changed since create (see providers/workspace-origin.ts). */
  host_changed: boolean;
};

/** The changes of a workspace and the record they are measured against. */
export interface WorkspaceReport extends Omit<WorkspaceChangesResult, 'changes'> {
  workspace: SandboxWorkspace;
  changes: ReportedChange[];
}

export interface WorkspaceReportOpts {
  patch: boolean;
  /** Default WORKSPACE_LIMITS.defaultPatchBytes. */
  maxPatchBytes?: number;
  /** Default WORKSPACE_LIMITS.defaultEntries. */
  maxEntries?: number;
  /** Bound on the agent's work (nominating an e2b sandbox's paths), in seconds (default 120). */
  timeoutS?: number;
}

/** The error for a sandbox created without a workspace. */
export function noWorkspace(): ProviderError {
  return new ProviderError('not_found', {
    code: 'no_workspace',
    detail: "This sandbox has no workspace: create one with create_sandbox's `workspace` (a directory the server permits).",
  });
}

/** The workspace recorded for the sandbox; throws not_found (code no_workspace) when it has none. */
export async function requireWorkspace(provider: Provider, sandboxId: string): Promise<SandboxWorkspace> {
  const workspace = provider.getWorkspace ? await provider.getWorkspace(sandboxId) : null;
  if (!workspace) throw noWorkspace();
  return workspace;
}

/** The host's report and the trees it read, whose current side holds what `apply` writes; close it when done. */
export interface ComputedChanges {
  report: WorkspaceReport;
  trees: TreeReaders;
  close(): void;
}

function notRunning(): ProviderError {
  return new ProviderError('unavailable', {
    code: 'workspace_unreachable',
    detail: "The sandbox's workspace cannot be read now: the sandbox is not running.",
  });
}

/** Opens a tree for the host to read; a tree that is not there (the sandbox ended) is unavailable. */
function openTree(root: string, missing: () => ProviderError): BeneathTreeReader {
  try {
    return beneathTreeReader(root);
  } catch (e) {
    if (e instanceof BeneathError) throw missing();
    throw e;
  }
}

/** The sandbox's workspace changes computed by the host (see the module comment), each with whether the host changed that path since create. */
export async function computeWorkspaceChanges(
  provider: Provider,
  agent: AgentClient,
  sandboxId: string,
  opts: WorkspaceReportOpts,
): Promise<ComputedChanges> {
  const workspace = await requireWorkspace(provider, sandboxId);
  const reportOpts = {
    patch: opts.patch,
    maxEntries: opts.maxEntries ?? WORKSPACE_LIMITS.defaultEntries,
    maxPatchBytes: opts.maxPatchBytes ?? WORKSPACE_LIMITS.defaultPatchBytes,
  };
  const opened: BeneathTreeReader[] = [];
  const close = () => opened.forEach((t) => t.close());
  try {
    const base = openTree(
      workspace.hostPath,
      () => new ProviderError('not_found', { code: 'workspace_missing', detail: "The workspace's host directory is no longer there." }),
    );
    opened.push(base);
    let trees: TreeReaders;
    let result: WorkspaceChangesResult;
    let addedAtCreate: Set<string> | undefined;
    if (workspace.hostTrees !== undefined) {
      if (workspace.hostTrees === null) throw notRunning();
      const upper = openTree(workspace.hostTrees.upper, notRunning);
      opened.push(upper);
      const current = openTree(workspace.hostTrees.current, notRunning);
      opened.push(current);
      trees = { base, current, upper };
      result = reportChanges(trees, collectChangesFrom(trees), reportOpts);
    } else {
      const downloaded = await downloadNominated(provider, agent, sandboxId, workspace, opts.timeoutS ?? 120);
      trees = { base, current: downloaded.current };
      addedAtCreate = downloaded.addedPaths;
      result = reportChanges(trees, collectChangesAt(trees, downloaded.paths), reportOpts);
      // The agent listed only so many: the host cannot know what lies past them.
      if (downloaded.isTruncated) result = { ...result, changes_truncated: true, patch_truncated: opts.patch };
    }
    const names = workspace.namesFile !== undefined ? readNames(workspace.namesFile) : undefined;
    const changed = hostChangedPaths(
      workspace.hostPath,
      workspace.origin,
      result.changes.map((c) => ({
        path: c.path,
        isDeletion: c.change === 'deleted',
        ...(workspace.isBaseFrozen && addedAtCreate ? { existedAtCreate: !addedAtCreate.has(c.path) } : {}),
      })),
      names,
    );
    const report = { ...result, workspace, changes: result.changes.map((c) => ({ ...c, host_changed: changed.has(c.path) })) };
    return { report, trees, close };
  } catch (e) {
    close();
    throw e;
  }
}

/** The sandbox's workspace changes, each with whether the host changed that path since create. */
export async function readWorkspaceChanges(
  provider: Provider,
  agent: AgentClient,
  sandboxId: string,
  opts: WorkspaceReportOpts,
): Promise<WorkspaceReport> {
  const computed = await computeWorkspaceChanges(provider, agent, sandboxId, opts);
  computed.close();
  return computed.report;
}

/** Sandboxes whose workspace path is held at most; the oldest are dropped first (and read again when needed). */
const WORKSPACE_PATHS_MAX = 10_000;

/**
 * Process-wide: where each sandbox's workspace is (null: it has none), read from its provider once —
 * it never changes — so the default cwd of every command costs a map lookup.
 */
export class WorkspacePaths {
  private readonly paths = new Map<string, string | null>();

  /** The workspace path of sandbox `qualifiedId`, or undefined when it has none; `read` runs until one read succeeds. */
  async pathOf(qualifiedId: string, read: () => Promise<string | null>): Promise<string | undefined> {
    let path = this.paths.get(qualifiedId);
    if (path === undefined) {
      path = await read();
      this.paths.set(qualifiedId, path);
      if (this.paths.size > WORKSPACE_PATHS_MAX) this.paths.delete(this.paths.keys().next().value!);
    }
    return path ?? undefined;
  }

  /** Forgets a destroyed sandbox. */
  forget(qualifiedId: string): void {
    this.paths.delete(qualifiedId);
  }
}
