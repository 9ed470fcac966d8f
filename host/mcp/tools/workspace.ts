// The workspace's side of the tools: create_sandbox's `workspace` argument (checked against the
// person's --workspace-allow), the default working directory of a workspace sandbox's commands, and
// workspace_changes — what the sandbox changed, for the model to report. Applying is the person's
// alone (`sandbox-mcp apply`): no tool writes to the host.
import * as z from 'zod';
import { WORKSPACE_LIMITS } from '../../../shared/protocol.js';
import { DIFF_STATES, WORKSPACE_CHANGES, WORKSPACE_ENTRY_KINDS } from '../../../shared/workspace/contract.js';
import type { ServerConfig } from '../../config/config.js';
import { SANDBOX_HOME } from '../../providers/provider.js';
import type { SandboxRef } from '../../providers/sandbox-ref.js';
import { resolveWorkspaceArg, WORKSPACE_ALLOW_FLAG } from '../../providers/workspace-policy.js';
import { readWorkspaceChanges } from '../../tasks/workspace-changes.js';
import { DefaultSandboxIdSchema, defineTool, learnSecrets, renewIfOwned, resolveSandbox, type ToolContext } from './tool.js';

/** create_sandbox's `workspace`. */
export const WorkspaceArgSchema = z
  .string()
  .min(1)
  .max(4096)
  .describe(
    "A directory on the server's machine (absolute path) to work on: it appears in the sandbox at /workspace (e2b: ~/workspace), the default cwd of its commands; " +
      'writes stay in the sandbox (workspace_changes lists them; the person applies them). Only directories the server permits (see this description).',
  );

/** The host directory a create gets, checked against the server's permitted ones (see workspace-policy.ts). */
export function resolveWorkspace(arg: string | undefined, config: Pick<ServerConfig, 'workspaceAllow'>): string | undefined {
  return arg === undefined ? undefined : resolveWorkspaceArg(arg, config.workspaceAllow ?? []);
}

/** The sentence create_sandbox's description gets: which directories this server offers as workspaces. */
export function workspaceSummary(config: Pick<ServerConfig, 'workspaceAllow'>): string {
  const roots = config.workspaceAllow ?? [];
  if (roots.length === 0) return `Workspaces: none offered (the person enables them with ${WORKSPACE_ALLOW_FLAG}).`;
  return `Workspaces: \`workspace\` may name any of these directories or one below it: ${roots.join(', ')}.`;
}

/**
 * The working directory a command without `cwd` runs in: the sandbox's workspace when it has one,
 * else its image's WorkingDir, or its image's user's home or `/` (read from the provider once per
 * process: neither changes), else undefined (the home).
 */
export async function defaultCwd(ctx: ToolContext, ref: SandboxRef): Promise<string | undefined> {
  return ctx.deps.workspaces.pathOf(ref.qualified, async () => {
    const provider = ctx.deps.providers.get(ref.provider);
    const workspace = provider.getWorkspace ? ((await provider.getWorkspace(ref.id))?.path ?? null) : null;
    return workspace ?? (provider.imageWorkingDir ? await provider.imageWorkingDir(ref.id) : null);
  });
}

/**
 * defaultCwd for a command the agent starts (a task, a promoted call): a workspace in the home
 * goes relative to it, which the agent resolves against its own HOME — the home wherever the
 * sandbox keeps it (E2B's fake keeps it elsewhere on its host).
 */
export async function defaultTaskCwd(ctx: ToolContext, ref: SandboxRef): Promise<string | undefined> {
  const path = await defaultCwd(ctx, ref);
  return path?.startsWith(`${SANDBOX_HOME}/`) ? path.slice(SANDBOX_HOME.length + 1) : path;
}

const ChangeSchema = z.strictObject({
  path: z.string().describe('Relative to the workspace, /-separated.'),
  change: z.enum(WORKSPACE_CHANGES),
  kind: z.enum(WORKSPACE_ENTRY_KINDS),
  mode_before: z.string().nullable().describe('Permission bits, four octal digits; null when it did not exist before.'),
  mode_after: z.string().nullable().describe('Permission bits now; null when deleted.'),
  size: z.number().nullable().describe('Bytes (after; before, when deleted); a symlink: its target; null for directories.'),
  link_target: z.string().nullable().describe("A symlink's target now; null otherwise."),
  diff: z
    .enum(DIFF_STATES)
    .describe('inline: in the patch (unless it was cut first); binary, too_large, unreadable: listed only; none: nothing to show.'),
  host_changed: z.boolean().describe("The person's own file here changed since create: applying would overwrite their change."),
});

const workspaceChanges = defineTool({
  name: 'workspace_changes',
  title: 'Workspace changes',
  description:
    "What the sandbox changed in its workspace (create_sandbox's `workspace`), against the host directory as it was at create: files, symlinks and directories " +
    `added, modified, deleted, and mode changes (the first ${WORKSPACE_LIMITS.defaultEntries} by path; counts of all), .git left out. ` +
    `With patch: true, also a unified diff of the text files (git's format; binary and large files are listed, not inlined; at most ${WORKSPACE_LIMITS.defaultPatchBytes / 1024} KiB, then patch_truncated). ` +
    'Nothing reaches the host: the person reviews and applies them with `sandbox-mcp diff` and `sandbox-mcp apply`.',
  input: z.strictObject({
    sandbox_id: DefaultSandboxIdSchema,
    patch: z.boolean().default(false).describe('Also return the unified diff (default false: the list only).'),
  }),
  output: z.strictObject({
    sandbox_id: z.string(),
    host_path: z.string().describe('The host directory the workspace was made from.'),
    path: z.string().describe('Where the sandbox sees it.'),
    changes: z.array(ChangeSchema),
    changes_truncated: z.boolean().describe('More changes than listed: counts has all of them.'),
    counts: z.strictObject({ added: z.number(), modified: z.number(), deleted: z.number(), mode_changed: z.number() }),
    patch: z.string().nullable().describe('The unified diff (secrets masked as in command output); null unless asked for.'),
    patch_truncated: z.boolean().describe('Files were left out of the patch to keep it within its cap.'),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await learnSecrets(ctx, ref);
    await renewIfOwned(ctx, ref);
    const report = await readWorkspaceChanges(ctx.deps.providers.get(ref.provider), ctx.deps.agent, ref.id, { patch: args.patch });
    // Paths and the patch are the sandbox's output: masked like a command's.
    const mask = (text: string) => ctx.deps.masker.mask(ref.qualified, text);
    return {
      result: {
        sandbox_id: ref.qualified,
        host_path: report.workspace.hostPath,
        path: report.workspace.path,
        changes: report.changes.map((c) => ({
          ...c,
          path: mask(c.path),
          link_target: c.link_target === null ? null : mask(c.link_target),
        })),
        changes_truncated: report.changes_truncated,
        counts: report.counts,
        patch: report.patch === null ? null : mask(report.patch),
        patch_truncated: report.patch_truncated,
      },
    };
  },
});

/** The workspace tools. */
export const workspaceTools = [workspaceChanges];
