// What one server process hands every session and tool: configuration, providers, the agent
// client and the shared services. Here rather than in tools/, so that the transports and the CLI
// depend on it without depending on the tools.
import type { AgentClient } from '../tasks/agent-client.js';
import type { ServerConfig } from '../config/config.js';
import type { Logger } from '../util/log.js';
import type { SecretMasker } from './mask.js';
import type { OwnerCache } from '../access/owner-scope.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { TaskRetention } from '../tasks/retention.js';
import type { WaitGate } from '../tasks/wait-gate.js';
import type { WorkspacePaths } from '../tasks/workspace-changes.js';

/** What every handler may use; one per server process, shared by all sessions. */
export interface ServerDeps {
  config: ServerConfig;
  providers: ProviderRegistry;
  agent: AgentClient;
  masker: SecretMasker;
  retention: TaskRetention;
  /** Bounds the get_task calls waiting at once per sandbox. */
  waits: WaitGate;
  /** Owners of sandboxes, read once per process (see access/owner-scope.ts). */
  owners: OwnerCache;
  /** Where each sandbox's workspace is, read once per process (the default cwd of its commands). */
  workspaces: WorkspacePaths;
  log: Logger;
}
