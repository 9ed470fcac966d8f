// `sandbox-mcp network [sandbox_id]`: the effective network for a person — this server's
// configuration (the permitted set, the default, the local mode), or one sandbox's egress and
// exposed ports. Tool results never carry it: sandbox metadata has nine fixed fields.
import type { ServerConfig } from '../config/config.js';
import type { NetworkDescription } from '../providers/provider.js';
import { parseSandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';

/** What `sandbox-mcp network` prints (as one JSON object). */
export type NetworkReport = { permitted: string[]; default: string; local_network: string } | ({ sandbox_id: string } & NetworkDescription);

/** The server's network configuration, or (with an id) the sandbox's network; throws ProviderError. */
export async function networkReport(deps: Pick<ServerDeps, 'providers'>, config: ServerConfig, sandboxId?: string): Promise<NetworkReport> {
  if (sandboxId === undefined) {
    return {
      permitted: config.network?.permitted ?? [],
      default: config.network?.default ?? 'provider',
      local_network: config.localNetwork,
    };
  }
  const ref = parseSandboxRef(sandboxId, config.defaultProvider);
  return { sandbox_id: ref.qualified, ...(await deps.providers.get(ref.provider).describeNetwork(ref.id)) };
}
