// What a server process (or a CLI command that talks to sandboxes) builds once: the providers,
// the agent client and the shared services every session and tool uses.
import { OwnerCache } from '../access/owner-scope.js';
import type { ServerConfig } from '../config/config.js';
import { DEFAULT_MAX_WAITING_GETS } from '../config/limit-options.js';
import { localProviderOpts } from '../config/local-options.js';
import { SecretMasker } from '../mcp/mask.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { createLocalProvider } from '../providers/local/local-provider.js';
import { createProviderRegistry, lazyProvider } from '../providers/registry.js';
import { loadAgentBundle } from '../providers/agent-bundle.js';
import { AgentClient } from '../tasks/agent-client.js';
import { TaskRetention } from '../tasks/retention.js';
import { WaitGate } from '../tasks/wait-gate.js';
import { createLogger } from '../util/log.js';

/** Server dependencies plus the one call that releases them (the providers' resources). */
export type ClosableDeps = ServerDeps & { close(): Promise<void> };

/** Builds the dependencies from the configuration; providers are made on first use. */
export function buildDeps(config: ServerConfig): ClosableDeps {
  const log = createLogger({ isDebug: Boolean(process.env.SANDBOX_MCP_DEBUG) });
  const providers = createProviderRegistry({
    local: () =>
      createLocalProvider({
        ...localProviderOpts(config),
        // The egress proxies' refusals, by host name only (never a path, a port or anything the request carried).
        onNetworkDenied: (d) => log.warn('network denied', { sandbox_id: `local:${d.sandboxId}`, host: d.host }),
      }),
    e2b: () => lazyProvider('e2b', async () => (await import('../providers/e2b/e2b-provider.js')).createE2bProvider(config.e2b)),
  });
  return {
    config,
    providers,
    agent: new AgentClient(loadAgentBundle()),
    masker: new SecretMasker(config.secretValues),
    retention: new TaskRetention(),
    waits: new WaitGate(config.maxWaitingGets ?? DEFAULT_MAX_WAITING_GETS),
    owners: new OwnerCache(),
    log,
    close: () => providers.closeAll(),
  };
}
