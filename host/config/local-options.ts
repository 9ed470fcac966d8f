// The local provider's options as the server configuration sets them: one place, so the server
// and `sandbox-mcp doctor` build the very same provider.
import type { ServerConfig } from './config.js';
import type { LocalProviderOpts } from '../providers/local/settings.js';
import { definedFields } from '../util/defined-fields.js';

/** LocalProviderOpts from the configuration (state and templates directories, network, bubblewrap path, limits, read-only paths). */
export function localProviderOpts(
  config: Pick<
    ServerConfig,
    | 'stateDir'
    | 'localNetwork'
    | 'bwrapPath'
    | 'localLimits'
    | 'templatesDir'
    | 'maxSnapshotStorageMb'
    | 'sandboxRoBinds'
    | 'noResidentAgent'
    | 'residentIdleExitS'
  >,
): LocalProviderOpts {
  return {
    network: config.localNetwork,
    ...(config.noResidentAgent ? { residentAgent: false } : {}),
    ...definedFields({
      stateDir: config.stateDir,
      tools: config.bwrapPath === undefined ? undefined : { bwrap: config.bwrapPath },
      limits: config.localLimits,
      templatesDir: config.templatesDir,
      maxSnapshotStorageMb: config.maxSnapshotStorageMb,
      roBinds: config.sandboxRoBinds,
      residentIdleExitS: config.residentIdleExitS,
    }),
  };
}
