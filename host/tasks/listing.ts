// The sandboxes of some providers, each with its tasks read through the agent protocol's `list`
// op: what `sandbox-mcp ls` prints and the dashboard shows. A sandbox whose tasks cannot be read
// (an agent older than `list`, no node, an error) carries the error that says why; the others are
// still listed.
import * as z from 'zod';
import { PROTOCOL_VERSION, TaskSummarySchema, agentSupportsOp, type TaskSummary } from '../../shared/protocol.js';
import { isProviderError, ProviderError } from '../providers/provider-error.js';
import type { ProviderRegistry } from '../providers/registry.js';
import { qualify, type ProviderId } from '../providers/sandbox-ref.js';
import { MetadataSchema, qualifyMetadata } from '../providers/sandbox-metadata.js';
import { definedFields } from '../util/defined-fields.js';
import type { AgentClient } from './agent-client.js';

/** Why a sandbox's tasks are missing from a listing: the error category, its code, what to do. */
export const TasksErrorSchema = z.strictObject({ category: z.string(), code: z.string().optional(), suggestion: z.string() });

/** One sandbox of `ls --json`: the nine metadata fields, its workspace's host directory (null: none), its tasks (null when unreadable) and why not. */
export const ListedSandboxSchema = MetadataSchema.extend({
  workspace: z.string().nullable(),
  tasks: z.array(TaskSummarySchema).nullable(),
  tasks_truncated: z.boolean(),
  tasks_error: TasksErrorSchema.nullable(),
});
export type ListedSandbox = z.infer<typeof ListedSandboxSchema>;

/** What `ls --json` prints: the sandboxes of the listed providers, tasks newest first. */
export const ListingSchema = z.strictObject({ sandboxes: z.array(ListedSandboxSchema) });
export type Listing = z.infer<typeof ListingSchema>;

/** The code of the tasks error for an agent that predates the `list` op. */
export const AGENT_WITHOUT_LIST = 'agent_without_list';
const AGENT_WITHOUT_LIST_DETAIL =
  "This sandbox's task agent predates task listing (protocol 1.0); its tasks can still be read with `logs`.";

// Sandboxes are asked in parallel, a few at a time: each question is one exec (a node start).
const PARALLEL_SANDBOXES = 4;
const LIST_CALL_TIMEOUT_S = 60;
const PAGE = 100;
const MAX_SANDBOXES = 1000;

/** What listing needs of the server's secret masker (mcp/mask.ts's SecretMasker, a layer above). */
export interface CommandMasker {
  learn(sandbox: string, read: () => Promise<Record<string, string>>): Promise<void>;
  mask(sandbox: string, text: string): string;
}

/** What listing needs: the providers (scoped to a principal, or not), the agent client, and the masker for commands. */
export interface ListingDeps {
  providers: ProviderRegistry;
  agent: AgentClient;
  masker: CommandMasker;
}

async function listAllSandboxes(deps: ListingDeps, provider: ProviderId) {
  const p = deps.providers.get(provider);
  const all = [];
  for (let offset = 0; offset < MAX_SANDBOXES; offset += PAGE) {
    const page = await p.list({ limit: PAGE, offset });
    all.push(...page);
    if (page.length < PAGE) break;
  }
  return all;
}

/** The tasks of one sandbox, or the error that explains why they cannot be listed. */
async function tasksOf(
  deps: ListingDeps,
  provider: ProviderId,
  sandboxId: string,
): Promise<{ tasks: TaskSummary[] | null; isTruncated: boolean; error: z.infer<typeof TasksErrorSchema> | null }> {
  const p = deps.providers.get(provider);
  try {
    const r = await deps.agent.call(p, sandboxId, { protocol: PROTOCOL_VERSION, op: 'list' }, { timeoutS: LIST_CALL_TIMEOUT_S });
    return { tasks: await maskedCommands(deps, provider, sandboxId, r.tasks), isTruncated: r.truncated, error: null };
  } catch (e) {
    let err = isProviderError(e) ? e : new ProviderError('internal');
    // An agent that does not know `list` refuses it as an invalid request; its hello says why.
    if (err.code === 'invalid_request') {
      const hello = await deps.agent
        .call(p, sandboxId, { protocol: PROTOCOL_VERSION, op: 'hello' }, { timeoutS: LIST_CALL_TIMEOUT_S })
        .catch(() => null);
      if (hello && !agentSupportsOp(hello, 'list'))
        err = new ProviderError('unsupported', { code: AGENT_WITHOUT_LIST, detail: AGENT_WITHOUT_LIST_DETAIL });
    }
    return {
      tasks: null,
      isTruncated: false,
      error: { category: err.category, ...definedFields({ code: err.code }), suggestion: err.suggestion },
    };
  }
}

/**
 * The tasks with their commands masked as get_task masks output: the server's secrets and the
 * sandbox's own (its record read once per process). A command may hold a secret typed out.
 */
async function maskedCommands(deps: ListingDeps, provider: ProviderId, sandboxId: string, tasks: TaskSummary[]): Promise<TaskSummary[]> {
  if (!tasks.some((t) => t.command !== undefined)) return tasks;
  const { qualified } = qualify(provider, sandboxId);
  await deps.masker.learn(qualified, () => deps.providers.get(provider).getEnvironment(sandboxId));
  return tasks.map((t) => (t.command === undefined ? t : { ...t, command: deps.masker.mask(qualified, t.command) }));
}

/** The host directory of the sandbox's workspace; null when it has none, or it cannot be read (the listing goes on). */
async function workspaceOf(deps: ListingDeps, provider: ProviderId, sandboxId: string): Promise<string | null> {
  const p = deps.providers.get(provider);
  try {
    return (await p.getWorkspace?.(sandboxId))?.hostPath ?? null;
  } catch {
    return null;
  }
}

/** Runs `fn` on every item, at most `size` at a time; results in the items' order. */
export async function inBatches<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(size, items.length) }, worker));
  return out;
}

/** Lists the sandboxes of `providers` and each one's tasks; throws only when a provider cannot list. */
export async function collectListing(deps: ListingDeps, providers: readonly ProviderId[]): Promise<Listing> {
  const sandboxes: ListedSandbox[] = [];
  for (const provider of providers) {
    const metas = await listAllSandboxes(deps, provider);
    const rows = await inBatches(metas, PARALLEL_SANDBOXES, async (m) => {
      const t = await tasksOf(deps, provider, m.sandbox_id);
      const workspace = await workspaceOf(deps, provider, m.sandbox_id);
      return { ...qualifyMetadata(provider, m), workspace, tasks: t.tasks, tasks_truncated: t.isTruncated, tasks_error: t.error };
    });
    sandboxes.push(...rows);
  }
  return { sandboxes };
}
