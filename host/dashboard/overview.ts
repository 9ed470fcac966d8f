// What the dashboard's main table shows: the sandboxes the principal may see, on the providers
// this server lists, each with its tasks (tasks/listing.ts, as `sandbox-mcp ls`), its usage
// against its limits, its exposed ports and, for those who see everyone's, its owner. A provider
// that cannot list is named with its error; the others are still shown.
import * as z from 'zod';
import { seesEverything, type Principal } from '../access/principal.js';
import type { ServerConfig } from '../config/config.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { isProviderError, ProviderError } from '../providers/provider-error.js';
import type { SandboxUsage, UsageAmount } from '../providers/provider.js';
import type { ProviderRegistry } from '../providers/registry.js';
import { parseSandboxRef, type ProviderId } from '../providers/sandbox-ref.js';
import { collectListing, inBatches, ListedSandboxSchema, type ListedSandbox } from '../tasks/listing.js';
import { definedFields } from '../util/defined-fields.js';

const AmountSchema = z.strictObject({ used: z.number(), limit: z.number().nullable() }).nullable();

/** One sandbox row: the listing's fields, its owner (only for those who see everyone's), usage and ports. */
export const OverviewSandboxSchema = ListedSandboxSchema.extend({
  provider: z.string(),
  /** The principal that created it (null: the operator); absent for a `user`, who sees only their own. */
  owner: z.string().nullable().optional(),
  /** null when the provider could not say (the sandbox ended meanwhile, say). */
  usage: z.strictObject({ memory_bytes: AmountSchema, processes: AmountSchema, disk_bytes: AmountSchema }).nullable(),
  ports: z.array(z.strictObject({ port: z.number().int(), url: z.string() })),
});
export type OverviewSandbox = z.infer<typeof OverviewSandboxSchema>;

/** GET /api/sandboxes. */
export const OverviewSchema = z.strictObject({
  sandboxes: z.array(OverviewSandboxSchema),
  /** Providers that could not list their sandboxes, and why (the tools' category and suggestion). */
  errors: z.array(z.strictObject({ provider: z.string(), category: z.string(), suggestion: z.string() })),
  /** When the listing was made (ISO 8601): the page's clock for ages and time left. */
  now: z.string(),
});
export type Overview = z.infer<typeof OverviewSchema>;

// Each sandbox's extras are a few cheap provider calls (no exec): several sandboxes at a time.
const PARALLEL_SANDBOXES = 8;

/** The providers the dashboard lists: the default one, and E2B too when a key for it is configured. */
export function listedProviders(config: Pick<ServerConfig, 'defaultProvider' | 'e2b'>): ProviderId[] {
  return config.defaultProvider === 'local' && config.e2b.apiKey ? ['local', 'e2b'] : [config.defaultProvider];
}

function amount(a: UsageAmount | null): z.infer<typeof AmountSchema> {
  return a === null ? null : { used: a.used, limit: a.limit };
}

function usageRow(u: SandboxUsage | null): OverviewSandbox['usage'] {
  return u === null ? null : { memory_bytes: amount(u.memoryBytes), processes: amount(u.processes), disk_bytes: amount(u.diskBytes) };
}

/** The extras of one listed sandbox, each best effort: a sandbox that ended meanwhile still gets its row. */
async function withExtras(providers: ProviderRegistry, principal: Principal, listed: ListedSandbox): Promise<OverviewSandbox> {
  const ref = parseSandboxRef(listed.sandbox_id, 'local');
  const provider = providers.get(ref.provider);
  const [usage, network, owner] = await Promise.all([
    provider.usage ? provider.usage(ref.id).catch(() => null) : Promise.resolve(null),
    provider.describeNetwork(ref.id).catch(() => null),
    seesEverything(principal) ? provider.getOwner(ref.id).catch(() => null) : Promise.resolve(undefined),
  ]);
  return {
    ...listed,
    provider: ref.provider,
    ...definedFields({ owner }),
    usage: usageRow(usage),
    ports: network?.exposed_ports ?? [],
  };
}

/** The overview for `principal`, whose scoped registry `deps.providers` is. */
export async function collectOverview(
  deps: Pick<ServerDeps, 'providers' | 'agent' | 'config' | 'masker'>,
  principal: Principal,
  nowMs: () => number = Date.now,
): Promise<Overview> {
  const sandboxes: OverviewSandbox[] = [];
  const errors: Overview['errors'] = [];
  for (const provider of listedProviders(deps.config)) {
    try {
      const { sandboxes: listed } = await collectListing(deps, [provider]);
      sandboxes.push(...(await inBatches(listed, PARALLEL_SANDBOXES, (s) => withExtras(deps.providers, principal, s))));
    } catch (e) {
      const error = isProviderError(e) ? e : new ProviderError('internal');
      errors.push({ provider, category: error.category, suggestion: error.suggestion });
    }
  }
  return { sandboxes, errors, now: new Date(nowMs()).toISOString() };
}
