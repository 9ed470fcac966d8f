// The network tools' side: create_sandbox's `network` argument (its schema, the check against
// the server's permitted set, the default), expose_port, and the sentences that tell a model what
// network its sandboxes have, so it does not spend calls finding out.
import * as z from 'zod';
import type { ServerConfig } from '../../config/config.js';
import { ProviderError } from '../../providers/provider-error.js';
import {
  ALLOW_ENTRY_MAX_CHARS,
  ALLOW_LIST_MAX_ENTRIES,
  formatAllowEntry,
  isPermitted,
  NO_EGRESS,
  parseAllowEntry,
  parseAllowList,
  type NetworkPolicy,
} from '../../providers/network-policy.js';
import { EXPOSED_PORT_MAX, EXPOSED_PORT_MIN } from '../../providers/provider.js';
import { DefaultSandboxIdSchema, defineTool, intIn, resolveSandbox } from './tool.js';

/** One allow-list entry as a tool argument. */
const AllowEntrySchema = z
  .string()
  .max(ALLOW_ENTRY_MAX_CHARS)
  .refine((text) => parseAllowEntry(text) !== null);

/** create_sandbox's `network`: "none", or the destinations to allow. */
export const NetworkArgSchema = z
  .union([
    z.literal('none'),
    z.strictObject({
      allow_out: z
        .array(AllowEntrySchema)
        .max(ALLOW_LIST_MAX_ENTRIES)
        .describe('Host names (exact or *.suffix) or IP addresses, each with an optional :port (without one: 80 and 443).'),
    }),
  ])
  .describe(
    'Egress: "none", or {"allow_out": [...]} with entries from the permitted set this tool\'s description lists. Omitted: the server\'s default.',
  );

/** The server's permitted entries (parsed once per call; the list is short). */
export function permittedOf(config: Pick<ServerConfig, 'network'>): string[] {
  return config.network?.permitted ?? [];
}

/**
 * The policy a create gets: the argument (checked against the permitted set: an entry outside it
 * is invalid_argument naming it), else the server's default; undefined keeps the provider's own.
 */
export function resolveNetworkArg(arg: z.infer<typeof NetworkArgSchema> | undefined, config: ServerConfig): NetworkPolicy | undefined {
  if (arg === 'none') return NO_EGRESS;
  if (arg !== undefined) {
    const permitted = parseAllowList(permittedOf(config));
    const allowOut = arg.allow_out.map((text, i) => {
      const entry = parseAllowEntry(text)!;
      if (!isPermitted(entry, permitted)) {
        throw new ProviderError('invalid_argument', {
          code: 'network_not_permitted',
          detail:
            `\`network.allow_out.${i}\` is outside the entries this server permits (see create_sandbox's description; ` +
            'a person widens them with --network-allow / SANDBOX_MCP_NETWORK_ALLOW).',
        });
      }
      return formatAllowEntry(entry);
    });
    return { allowOut: [...new Set(allowOut)] };
  }
  switch (config.network?.default ?? 'provider') {
    case 'provider':
      return undefined;
    case 'none':
      return NO_EGRESS;
    case 'allowed':
      return { allowOut: permittedOf(config) };
  }
}

const LISTED_ENTRIES_MAX = 40;

/** What a model should know about its sandboxes' network under `config`, in a few sentences. */
export function networkSummary(config: Pick<ServerConfig, 'localNetwork' | 'network'>): string {
  const permitted = permittedOf(config);
  const shown = permitted.slice(0, LISTED_ENTRIES_MAX).join(', ') + (permitted.length > LISTED_ENTRIES_MAX ? ', …' : '');
  const noNetwork = 'no network at all (only its own loopback: no DNS, no internet)';
  const byDefault = {
    provider:
      (config.localNetwork === 'host' ? "a local sandbox shares this machine's network" : `a local sandbox has ${noNetwork}`) +
      " and an e2b sandbox has E2B's default internet access",
    none: `a sandbox has ${noNetwork}`,
    allowed: 'a sandbox gets the whole permitted set',
  }[config.network?.default ?? 'provider'];
  return [
    `Network: without \`network\`, ${byDefault}.`,
    permitted.length === 0
      ? 'This server permits no egress: create_sandbox accepts only `network: "none"`.'
      : `create_sandbox's \`network: {"allow_out": [...]}\` may allow entries within this server's permitted set: ${shown} ` +
        '(an entry without :port means ports 80 and 443). A local sandbox reaches them over HTTP/HTTPS through a proxy named in ' +
        'HTTP_PROXY/HTTPS_PROXY (tools that ignore those variables get no network); other destinations get a 403 naming the host.',
    'expose_port gives the person a URL for a port a sandbox serves (e.g. a web app started with start_task).',
  ].join(' ');
}

const exposePort = defineTool({
  name: 'expose_port',
  title: 'Expose sandbox port',
  description:
    'Return a URL the person (not the sandbox) can open to reach a TCP port a sandbox serves. Local sandboxes: ' +
    "a listener on this machine's loopback forwarding into the sandbox (serve on 0.0.0.0 or 127.0.0.1 inside). " +
    "e2b sandboxes: E2B's public HTTPS host for the port. The same URL on every call; it stops working when the sandbox ends. " +
    'Nothing needs to listen yet: start the server (e.g. with start_task) before or after. ' +
    "A port the sandbox's own plumbing uses (a local sandbox's egress proxy, e2b's envd) is refused: serve on another.",
  input: z.strictObject({
    port: intIn(EXPOSED_PORT_MIN, EXPOSED_PORT_MAX).describe('The TCP port inside the sandbox.'),
    sandbox_id: DefaultSandboxIdSchema,
  }),
  output: z.strictObject({ sandbox_id: z.string(), port: z.number(), url: z.string() }),
  annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    const { url } = await ctx.deps.providers.get(ref.provider).exposePort(ref.id, args.port);
    return { result: { sandbox_id: ref.qualified, port: args.port, url } };
  },
});

/** The network tools. */
export const networkTools = [exposePort];
