// A sandbox's workspace changes as the host reports them, for the workspace_changes tool and the
// person's `diff` and `apply`: the record the provider kept at create, the changes the agent
// computes inside the sandbox (shared/workspace/), and beside each the host's own verdict — did the
// person's file change since create? — which the sandbox can neither see nor fake.
import { PROTOCOL_VERSION, WORKSPACE_LIMITS, type WorkspaceChangesResult } from '../../shared/protocol.js';
import { ProviderError } from '../providers/provider-error.js';
import type { Provider, SandboxWorkspace } from '../providers/provider.js';
import { hostChangedPaths, readNames } from '../providers/workspace-origin.js';
import { definedFields } from '../util/defined-fields.js';
import type { AgentClient } from './agent-client.js';

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
  /** Bound on the agent's work, in seconds (default 120). */
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

// Room in the exec's capture for the listed changes beside the patch (a change takes ~200 bytes of JSON).
const ANSWER_OVERHEAD_BYTES = 4 * 1024 * 1024;

/** The sandbox's workspace changes, each with whether the host changed that path since create. */
export async function readWorkspaceChanges(
  provider: Provider,
  agent: AgentClient,
  sandboxId: string,
  opts: WorkspaceReportOpts,
): Promise<WorkspaceReport> {
  const workspace = await requireWorkspace(provider, sandboxId);
  const maxPatchBytes = opts.maxPatchBytes ?? WORKSPACE_LIMITS.defaultPatchBytes;
  const result = await agent.call(
    provider,
    sandboxId,
    {
      protocol: PROTOCOL_VERSION,
      op: 'workspace_changes',
      base: workspace.trees.base,
      current: workspace.trees.current,
      ...definedFields({ upper: workspace.trees.upper }),
      patch: opts.patch,
      max_entries: opts.maxEntries ?? WORKSPACE_LIMITS.defaultEntries,
      max_patch_bytes: maxPatchBytes,
    },
    // JSON escapes can double a patch's bytes (and more for control characters).
    { timeoutS: opts.timeoutS ?? 120, maxOutputBytes: 2 * maxPatchBytes + ANSWER_OVERHEAD_BYTES },
  );
  const names = workspace.namesFile !== undefined ? readNames(workspace.namesFile) : undefined;
  const changed = hostChangedPaths(
    workspace.hostPath,
    workspace.origin,
    result.changes.map((c) => ({
      path: c.path,
      isDeletion: c.change === 'deleted',
      ...definedFields({ existedAtCreate: workspace.isBaseFrozen ? c.change !== 'added' : undefined }),
    })),
    names,
  );
  return { ...result, workspace, changes: result.changes.map((c) => ({ ...c, host_changed: changed.has(c.path) })) };
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
