// Why a failed command's network request failed, for both providers: what the sandbox's egress
// proxy refused or could not reach while it ran (a provider with a proxy says; see
// Provider.egressNotes), else — when the output shows a failed name lookup or a network with no
// route — what the sandbox's network is and how to get the one it needs. Tools put these after a
// failed command's stderr ([sandbox-mcp] lines) or beside a failed task's view ("note:").
import type { EgressWindow } from '../../providers/provider.js';
import type { SandboxRef } from '../../providers/sandbox-ref.js';
import { permittedOf } from './network.js';
import type { ToolContext } from './tool.js';

/**
 * Output that shows a name that did not resolve or a network with no route, as curl, wget, git,
 * pip/python, npm/node, go, cargo and apt print it. Loopback failures ("connection refused") are
 * left out: a sandbox's own servers can cause them, network or not.
 */
const NETWORK_FAILURE =
  /temporary failure in name resolution|name or service not known|could(?: not|n't) resolve (?:host|proxy)|getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|\bEAI_AGAIN\b|no address associated with hostname|unable to resolve host|temporary failure resolving|\bno such host\b|failed to resolve|network is unreachable|\bENETUNREACH\b/i;

/** True when `output` shows a failed name lookup or an unreachable network. */
export function showsNetworkFailure(output: string): boolean {
  return NETWORK_FAILURE.test(output);
}

/** How a person or an agent gets a sandbox with network on this server, in a sentence. */
function howToAsk(ctx: ToolContext): string {
  const permitted = permittedOf(ctx.deps.config);
  if (permitted.length === 0) {
    return 'This server permits no egress: the person running it can allow destinations with --network-allow (for example @packages, for package registries), then create a sandbox with network: {"allow_out": [...]}.';
  }
  const shown = permitted.slice(0, 8).join(', ') + (permitted.length > 8 ? ', …' : '');
  return `A sandbox gets its network when it is created: create one with network: {"allow_out": [...]} naming what it needs, within what this server permits (${shown}).`;
}

/** The note for a failed command whose output shows a network failure, by the sandbox's network; null when it explains nothing. */
async function networkModeNote(ctx: ToolContext, ref: SandboxRef): Promise<string | null> {
  const network = await ctx.deps.providers.get(ref.provider).describeNetwork(ref.id);
  const shows = "and this command's output shows a failed name lookup or connection";
  if (network.egress === 'none') {
    return `This sandbox has no network (only its own loopback: no DNS, no internet), ${shows}. ${howToAsk(ctx)}`;
  }
  if (network.egress !== 'allow_out') return null;
  const list = network.allow_out.slice(0, 8).join(', ') + (network.allow_out.length > 8 ? ', …' : '');
  if (network.proxy !== null) {
    return (
      `This sandbox reaches only ${list}, and only through its egress proxy (HTTP_PROXY/HTTPS_PROXY, ${network.proxy}), ${shows} ` +
      "the proxy never saw: a tool that ignores those variables gets no network, not even DNS (pass the proxy to it, e.g. pip's --proxy). " +
      `Another destination needs a new sandbox whose allow_out names it. ${howToAsk(ctx)}`
    );
  }
  return `This sandbox reaches only ${list} (its network.allow_out; everything else is blocked), ${shows}. Another destination needs a new sandbox whose allow_out names it. ${howToAsk(ctx)}`;
}

/**
 * The network notes for a failed command or task that ran in `window`, whose output (the part at
 * hand) is `output`: the egress proxy's refusals and failures, else a note on the sandbox's
 * network when the output shows a network failure; [] when nothing explains it. Best effort: a
 * provider that cannot tell gives none. Not masked: callers mask them like the output.
 */
export async function networkNotes(ctx: ToolContext, ref: SandboxRef, window: EgressWindow, output: string): Promise<string[]> {
  const provider = ctx.deps.providers.get(ref.provider);
  const egress = (await provider.egressNotes?.(ref.id, window).catch(() => [])) ?? [];
  if (egress.length > 0 || !showsNetworkFailure(output)) return egress;
  const note = await networkModeNote(ctx, ref).catch(() => null);
  return note !== null ? [note] : [];
}
