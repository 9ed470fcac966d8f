// `sandbox-mcp ls`: every sandbox of a provider with its tasks, read through the agent protocol's
// `list` op — for people (aligned columns, relative times) or, with --json, for scripts. A sandbox
// whose tasks cannot be read (an agent older than `list`, no node, an error) gets a line saying
// why; the others are still listed.
import * as z from 'zod';
import { PROTOCOL_VERSION, TaskSummarySchema, agentSupportsOp, type TaskSummary } from '../../shared/protocol.js';
import type { ProviderId } from '../providers/sandbox-ref.js';
import { isProviderError, ProviderError } from '../providers/provider-error.js';
import { MetadataSchema, qualifyMetadata } from '../providers/sandbox-metadata.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { definedFields } from '../util/defined-fields.js';
import { formatBytes, formatDuration, formatRelative, renderTable, stateColour, type Cell } from './format.js';

/** Why a sandbox's tasks are missing from a listing: the error category, its code, what to do. */
export const TasksErrorSchema = z.strictObject({ category: z.string(), code: z.string().optional(), suggestion: z.string() });

/** One sandbox of `ls --json`: the nine metadata fields, its tasks (null when unreadable) and why not. */
export const ListedSandboxSchema = MetadataSchema.extend({
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

type Deps = Pick<ServerDeps, 'providers' | 'agent'>;

async function listAllSandboxes(deps: Deps, provider: ProviderId) {
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
  deps: Deps,
  provider: ProviderId,
  sandboxId: string,
): Promise<{ tasks: TaskSummary[] | null; isTruncated: boolean; error: z.infer<typeof TasksErrorSchema> | null }> {
  const p = deps.providers.get(provider);
  try {
    const r = await deps.agent.call(p, sandboxId, { protocol: PROTOCOL_VERSION, op: 'list' }, { timeoutS: LIST_CALL_TIMEOUT_S });
    return { tasks: r.tasks, isTruncated: r.truncated, error: null };
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

async function inBatches<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
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
export async function collectListing(deps: Deps, providers: readonly ProviderId[]): Promise<Listing> {
  const sandboxes: ListedSandbox[] = [];
  for (const provider of providers) {
    const metas = await listAllSandboxes(deps, provider);
    const rows = await inBatches(metas, PARALLEL_SANDBOXES, async (m) => {
      const t = await tasksOf(deps, provider, m.sandbox_id);
      return { ...qualifyMetadata(provider, m), tasks: t.tasks, tasks_truncated: t.isTruncated, tasks_error: t.error };
    });
    sandboxes.push(...rows);
  }
  return { sandboxes };
}

function limitsText(s: ListedSandbox): string {
  const parts = [
    s.cpu_count !== null ? `cpu=${s.cpu_count}` : null,
    s.memory_mb !== null ? `mem=${s.memory_mb}MiB` : null,
    s.disk_size_mb !== null ? `disk=${s.disk_size_mb}MiB` : null,
  ].filter((p): p is string => p !== null);
  return parts.length > 0 ? parts.join(' ') : '-';
}

const isoMs = (iso: string | null) => (iso === null ? null : Date.parse(iso));
const unixMs = (s: number | null) => (s === null ? null : s * 1000);

function taskRows(tasks: readonly TaskSummary[], nowMs: number): Cell[][] {
  const header: Cell[] = ['TASK', 'STATE', 'EXIT', 'STARTED', 'DURATION', 'STDOUT', 'STDERR'].map((text) => ({
    text,
    colour: 'bold' as const,
  }));
  const rows = tasks.map((t): Cell[] => {
    const started = unixMs(t.started_at);
    const ended = unixMs(t.finished_at) ?? (t.state === 'running' ? nowMs : null);
    return [
      { text: t.task_id },
      { text: t.state, ...definedColour(stateColour(t.state)) },
      { text: t.exit_code === null ? '-' : String(t.exit_code) },
      { text: formatRelative(started, nowMs) },
      { text: started !== null && ended !== null ? formatDuration(ended - started) : '-' },
      // `+`: the stream reached the 1 MiB cap and the rest was dropped.
      { text: formatBytes(t.stdout_size) + (t.stdout_truncated ? '+' : '') },
      { text: formatBytes(t.stderr_size) + (t.stderr_truncated ? '+' : '') },
    ];
  });
  return [header, ...rows];
}

function definedColour(c: Cell['colour']): Pick<Cell, 'colour'> {
  return c ? { colour: c } : {};
}

/** The listing for people: one aligned row per sandbox, each followed by its tasks (indented) or why there are none. */
export function renderListing(listing: Listing, nowMs: number, colour: boolean): string {
  if (listing.sandboxes.length === 0) return 'No sandboxes.\n';
  const header: Cell[] = ['SANDBOX', 'TEMPLATE', 'STATE', 'STARTED', 'ENDS', 'LIMITS'].map((text) => ({ text, colour: 'bold' as const }));
  const sandboxRows = listing.sandboxes.map((s): Cell[] => [
    { text: s.sandbox_id },
    { text: s.template ?? '-' },
    { text: s.status ?? '-', ...definedColour(stateColour(s.status)) },
    { text: formatRelative(isoMs(s.started_at), nowMs) },
    { text: formatRelative(isoMs(s.end_at), nowMs) },
    { text: limitsText(s) },
  ]);
  // One table for the sandboxes, so their columns line up across the whole listing.
  const [headerLine, ...lines] = renderTable([header, ...sandboxRows], { colour });
  const out = [headerLine!];
  listing.sandboxes.forEach((s, i) => {
    out.push(lines[i]!);
    if (s.tasks_error) {
      const what = s.tasks_error.code === AGENT_WITHOUT_LIST ? '' : `${s.tasks_error.category}: `;
      out.push(`    tasks unavailable: ${what}${s.tasks_error.suggestion}`);
    } else if (!s.tasks || s.tasks.length === 0) {
      out.push('    no tasks');
    } else {
      out.push(...renderTable(taskRows(s.tasks, nowMs), { indent: '    ', colour }));
      if (s.tasks_truncated) out.push('    (only the newest tasks are listed)');
    }
  });
  return out.join('\n') + '\n';
}
