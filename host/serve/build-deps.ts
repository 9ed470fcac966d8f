// What a server process (or a CLI command that talks to sandboxes) builds once: the providers,
// the agent client and the shared services every session and tool uses.
import { OwnerCache } from '../access/owner-scope.js';
import type { ServerConfig } from '../config/config.js';
import { DEFAULT_MAX_WAITING_GETS } from '../config/limit-options.js';
import { localProviderOpts } from '../config/local-options.js';
import { SecretMasker } from '../mcp/mask.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { createLocalProvider, isRefusal, type EgressFailureListener, type EgressFailureReport } from '../providers/local/local-provider.js';
import { createProviderRegistry, lazyProvider } from '../providers/registry.js';
import { loadAgentBundle } from '../providers/agent-bundle.js';
import { AgentClient } from '../tasks/agent-client.js';
import { TaskRetention } from '../tasks/retention.js';
import { WaitGate } from '../tasks/wait-gate.js';
import { WorkspacePaths } from '../tasks/workspace-changes.js';
import { definedFields } from '../util/defined-fields.js';
import { createLogger, isDebugOn } from '../util/log.js';

/** Server dependencies plus the one call that releases them (the providers' resources). */
export type ClosableDeps = ServerDeps & { close(): Promise<void> };

/** A failure's log fields: the sandbox, the destination and the reason, and the non-public address a name resolved to. */
function egressLogFields(f: EgressFailureReport): Record<string, string | number> {
  return {
    sandbox_id: `local:${f.sandboxId}`,
    host: f.host,
    ...(f.port > 0 ? { port: f.port } : {}),
    reason: f.reason,
    ...(f.address !== undefined ? { address: f.address } : {}),
  };
}

/** Who the dependencies are for. */
export interface BuildDepsOpts {
  /**
   * A serving process logs its sandboxes' egress failures; a CLI command must not: the provider
   * reads each sandbox's record from its start in every process, so every `ls` or `logs` would
   * print all earlier refusals again, among what the person asked for.
   */
  logsEgressFailures: boolean;
}

/** Builds the dependencies from the configuration; providers are made on first use. */
export function buildDeps(config: ServerConfig, opts: BuildDepsOpts): ClosableDeps {
  const log = createLogger({ isDebug: isDebugOn(process.env) });
  // The egress proxies' failures by destination and reason (never a path or anything else the request carried).
  const onEgressFailure: EgressFailureListener | undefined = opts.logsEgressFailures
    ? (f) => log.warn(isRefusal(f.reason) ? 'network denied' : 'network unreachable', egressLogFields(f))
    : undefined;
  const providers = createProviderRegistry({
    local: () => createLocalProvider({ ...localProviderOpts(config), ...definedFields({ onEgressFailure }) }),
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
    workspaces: new WorkspacePaths(),
    log,
    close: () => providers.closeAll(),
  };
}
