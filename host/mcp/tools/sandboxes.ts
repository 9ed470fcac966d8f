// Lifecycle tools: create, kill, list, inspect, extend.
import * as z from 'zod';
import { secretValuesOf } from '../../config/config.js';
import { ProviderError, isProviderError } from '../../providers/provider-error.js';
import { SANDBOX_LIFETIME_DEFAULT_S, SANDBOX_LIFETIME_MAX_S, SANDBOX_LIFETIME_MIN_S } from '../../providers/provider.js';
import { MetadataSchema, qualifyMetadata } from '../../providers/sandbox-metadata.js';
import { PROVIDER_IDS, qualify } from '../../providers/sandbox-ref.js';
import { DefaultSandboxIdSchema, EnvsSchema, defineTool, intIn, resolveSandbox, type ToolContext } from './tool.js';
import { definedFields } from '../../util/defined-fields.js';
import { NetworkArgSchema, networkSummary, resolveNetworkArg } from './network.js';
import { defaultCwd, resolveWorkspace, WorkspaceArgSchema, workspaceSummary } from './workspace.js';
import type { ServerDeps } from '../server-deps.js';

/** A sandbox lifetime argument: whole seconds within the contract's bounds. */
const LifetimeSchema = intIn(SANDBOX_LIFETIME_MIN_S, SANDBOX_LIFETIME_MAX_S);

/**
 * Added to create_sandbox's text in sessions whose sandboxes end with them (stdio): a client that
 * starts a server per call would otherwise lose the sandbox right after this call, unawares.
 */
export const CLEANUP_NOTE =
  'Note: this sandbox is destroyed when this MCP session ends (a client that starts the server for each call ends it right after this call), ' +
  'unless a task is started in it with start_task. To keep sandboxes until their own timeout, run the server with --keep-sandboxes (SANDBOX_MCP_KEEP_SANDBOXES=1).';

/** The most template names create_sandbox's description lists per provider. */
const LISTED_TEMPLATES_MAX = 50;

/**
 * create_sandbox's templates, read when tools are listed (a template made since shows without a
 * restart): the local provider's stored ones, whose roots are the sandbox's own to change.
 */
export function templatesSummary(deps: Pick<ServerDeps, 'providers'>): string {
  let names: string[] = [];
  try {
    names = deps.providers.get('local').templateNames?.() ?? [];
  } catch {
    // A provider that cannot be built lists nothing; create reports why.
  }
  const shown = names.slice(0, LISTED_TEMPLATES_MAX).join(', ') + (names.length > LISTED_TEMPLATES_MAX ? ', …' : '');
  return (
    "Templates: a local sandbox's `template` is base (the host's system directories, read-only; the default)" +
    (names.length > 0
      ? ` or one of this server's: ${shown} — a root of its own, writable for that sandbox alone (apt-get, pip, edits under /usr) within its disk budget` +
        ' (OWNER/NAME is a snapshot a token holder made: theirs alone).'
      : '; this server has no other (sandbox-mcp template build|import makes them).') +
    " An e2b sandbox's is an E2B template name."
  );
}

const createSandbox = defineTool({
  name: 'create_sandbox',
  title: 'Create sandbox',
  description:
    "Create a new sandbox and make it this session's default. It is destroyed when the session ends unless a task was started in it. " +
    "Omitted options keep the provider's defaults. Keep secrets in the server's configuration; envs given here are visible to the model.",
  input: z.strictObject({
    template: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe(
        'The template to start from (default "base"): for a local sandbox, one of those listed above; for an e2b one, an E2B template name or id.',
      ),
    timeout: LifetimeSchema.optional().describe(`Lifetime in seconds (default ${SANDBOX_LIFETIME_DEFAULT_S}).`),
    envs: EnvsSchema.optional().describe('Environment variables for every command in the sandbox.'),
    region: z
      .string()
      .min(1)
      .max(100)
      .optional()
      .describe('Where it runs: a local sandbox accepts only "local"; E2B takes no region (an error). Default: the provider\'s.'),
    cpu: z.number().int().min(1).max(1024).optional().describe("CPU cores (default: no CPU limit; at most the server's maximum)."),
    memory: z
      .number()
      .int()
      .min(1)
      .max(1048576)
      .optional()
      .describe("Memory limit in MB, the sandbox's files included (default and maximum: the server's)."),
    provider: z.enum(PROVIDER_IDS).optional().describe("A configured provider id; default is the server's."),
    network: NetworkArgSchema.optional(),
    workspace: WorkspaceArgSchema.optional(),
  }),
  output: MetadataSchema,
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  configNote: (config) => `${networkSummary(config)}\n${workspaceSummary(config)}`,
  listNote: templatesSummary,
  async run(args, ctx) {
    const providerId = args.provider ?? ctx.deps.config.defaultProvider;
    const provider = ctx.deps.providers.get(providerId);
    const network = resolveNetworkArg(args.network, ctx.deps.config);
    const workspace = resolveWorkspace(args.workspace, ctx.deps.config);
    const meta = await provider.create(
      definedFields({
        template: args.template,
        timeoutS: args.timeout,
        envs: args.envs,
        region: args.region,
        cpu: args.cpu,
        memoryMb: args.memory,
        network,
        workspace,
      }),
    );
    const ref = qualify(providerId, meta.sandbox_id);
    // This process knows the sandbox's record: its envs are all there is to learn.
    ctx.deps.masker.add(ref.qualified, secretValuesOf(args.envs ?? {}));
    ctx.deps.masker.markLearned(ref.qualified);
    if (!ctx.session.adopt(ref.qualified, args.timeout ?? SANDBOX_LIFETIME_DEFAULT_S)) {
      // The session ended while we were creating: nobody owns this sandbox, so it must not outlive us.
      await provider.kill(ref.id).catch(() => undefined);
      throw new ProviderError('conflict', {
        code: 'session_closed',
        detail: 'The session ended while the sandbox was being created; it was destroyed.',
      });
    }
    const result = qualifyMetadata(providerId, meta);
    const notes: string[] = [];
    if (workspace !== undefined) {
      const path = await defaultCwd(ctx, ref);
      notes.push(
        `The workspace is at ${path ?? 'an unknown path'} in the sandbox (the default cwd of its commands); workspace_changes lists what you change there.`,
      );
    }
    if (ctx.session.opts.hasCleanupNote) notes.push(CLEANUP_NOTE);
    return notes.length > 0 ? { result, content: notes.map((text) => ({ type: 'text' as const, text })) } : { result };
  },
});

const killSandbox = defineTool({
  name: 'kill_sandbox',
  title: 'Destroy sandbox',
  description:
    'Destroy a sandbox and everything in it, including its tasks and their logs (the complete cleanup). Defaults to the session default. ' +
    'Idempotent: a sandbox that is already gone (destroyed, expired, or never one you could see) is a success with destroyed: false.',
  input: z.strictObject({ sandbox_id: DefaultSandboxIdSchema }),
  output: z.strictObject({
    success: z.boolean(),
    sandbox_id: z.string(),
    destroyed: z.boolean().describe('true: this call destroyed it; false: there was no such sandbox to destroy.'),
  }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    try {
      await ctx.deps.providers.get(ref.provider).kill(ref.id);
    } catch (e) {
      if (!isProviderError(e) || e.category !== 'not_found') throw e;
      // Already gone (expired, killed elsewhere, a retry after a lost answer): what was asked for
      // holds. For a named user this is also the answer for another principal's sandbox, which
      // the scope reports exactly as a missing one: the same bytes either way, so nothing leaks.
      // Only the session's own state is forgotten (it must not linger as the default): another
      // principal's retention and masking are none of this caller's business.
      ctx.session.forget(ref.qualified);
      return { result: { success: true, sandbox_id: ref.qualified, destroyed: false } };
    }
    forget(ctx, ref.qualified);
    return { result: { success: true, sandbox_id: ref.qualified, destroyed: true } };
  },
});

function forget(ctx: ToolContext, qualifiedId: string): void {
  ctx.session.forget(qualifiedId);
  ctx.deps.retention.forget(qualifiedId);
  ctx.deps.masker.forget(qualifiedId);
  ctx.deps.workspaces.forget(qualifiedId);
}

const listSandboxes = defineTool({
  name: 'list_sandboxes',
  title: 'List sandboxes',
  description:
    'List sandboxes visible to the configured account and provider. Increase offset for the next page; there is no total or cursor. ' +
    'Listing never creates, selects or adopts a sandbox.',
  input: z.strictObject({
    status: z.enum(['running', 'paused']).optional().describe('Only sandboxes in this state (default: all).'),
    limit: intIn(1, 100).default(100).describe('Sandboxes per page (1-100, default 100).'),
    offset: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(0)
      .describe('How many to skip (default 0): the next page starts at offset + limit.'),
    provider: z.enum(PROVIDER_IDS).optional().describe("Which provider's sandboxes to list (default: the server's default provider)."),
    region: z.string().min(1).max(100).optional().describe('Only sandboxes in this region (default: all).'),
  }),
  output: z.strictObject({ sandboxes: z.array(MetadataSchema), limit: z.number(), offset: z.number() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const providerId = args.provider ?? ctx.deps.config.defaultProvider;
    const items = await ctx.deps.providers.get(providerId).list({
      limit: args.limit,
      offset: args.offset,
      ...definedFields({ status: args.status, region: args.region }),
    });
    return {
      result: { sandboxes: items.slice(0, args.limit).map((m) => qualifyMetadata(providerId, m)), limit: args.limit, offset: args.offset },
    };
  },
});

const getSandbox = defineTool({
  name: 'get_sandbox',
  title: 'Inspect sandbox',
  description:
    'Current metadata of a sandbox (the session default when sandbox_id is omitted). Never creates, resumes or extends a sandbox.',
  input: z.strictObject({ sandbox_id: DefaultSandboxIdSchema }),
  output: MetadataSchema,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    return { result: qualifyMetadata(ref.provider, await ctx.deps.providers.get(ref.provider).getInfo(ref.id)) };
  },
});

const setSandboxTimeout = defineTool({
  name: 'set_sandbox_timeout',
  title: 'Set sandbox lifetime',
  description:
    "Set a sandbox's lifetime to `timeout` seconds from now. For a sandbox this session created, later command and file tools renew with this duration.",
  input: z.strictObject({
    timeout: LifetimeSchema.describe('New lifetime in seconds, counted from now.'),
    sandbox_id: DefaultSandboxIdSchema,
  }),
  output: z.strictObject({ success: z.boolean(), sandbox_id: z.string(), timeout: z.number() }),
  // Destructive: a short timeout ends the sandbox and everything in it.
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await ctx.deps.providers.get(ref.provider).setTimeout(ref.id, args.timeout);
    // Only after success, and only for a sandbox this still-open session owns.
    ctx.session.setRenewal(ref.qualified, args.timeout);
    return { result: { success: true, sandbox_id: ref.qualified, timeout: args.timeout } };
  },
});

/** The five lifecycle tools. */
export const sandboxTools = [createSandbox, killSandbox, listSandboxes, getSandbox, setSandboxTimeout];
