// What one server process hands every session and tool: configuration, providers, the agent
// client and the shared services. Here rather than in tools/, so that the transports, the CLI
// and the provider registry depend on it without depending on the tools.
import type { AgentClient } from './agent-client.js';
import type { ProviderId, ServerConfig } from './config.js';
import type { Logger } from './log.js';
import type { SecretMasker } from './mask.js';
import type { OwnerCache } from './providers/owner-scope.js';
import type { Provider } from './providers/provider.js';
import type { TaskRetention } from './retention.js';
import type { WaitGate } from './wait-gate.js';

/** Looks up a provider by id; throws a ProviderError when it cannot be configured. */
export interface ProviderRegistry {
  get(id: ProviderId): Provider;
}

/** What every handler may use; one per server process, shared by all sessions. */
export interface ServerDeps {
  config: ServerConfig;
  providers: ProviderRegistry;
  agent: AgentClient;
  masker: SecretMasker;
  retention: TaskRetention;
  /** Bounds the get_task calls waiting at once per sandbox. */
  waits: WaitGate;
  /** Owners of sandboxes, read once per process (see providers/owner-scope.ts). */
  owners: OwnerCache;
  log: Logger;
}
