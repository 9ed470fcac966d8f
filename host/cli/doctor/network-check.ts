// The doctor's line on the network sandboxes get under this configuration: what a create without
// `network` gets, and what create_sandbox may allow. A warning when local sandboxes share this
// machine's network (its loopback services and abstract sockets included).
import type { ServerConfig } from '../../config/config.js';
import { ok, warn, type Check } from './check.js';

/** The effective network, as one ok or warn line (never a failure: every setting works). */
export function checkNetwork(config: Pick<ServerConfig, 'localNetwork' | 'network'>): Check {
  const permitted = config.network?.permitted ?? [];
  const byDefault = config.network?.default ?? 'provider';
  const allowed =
    permitted.length === 0
      ? 'no egress may be allowed (--network-allow is empty)'
      : `create_sandbox may allow ${permitted.length} entr${permitted.length === 1 ? 'y' : 'ies'} of --network-allow through a proxy`;
  if (config.localNetwork === 'host' && byDefault === 'provider') {
    return warn(
      'network',
      `local sandboxes share this machine's network, loopback services included; ${allowed}`,
      'unset SANDBOX_MCP_LOCAL_NETWORK (isolated) and allow what sandboxes need with --network-allow',
    );
  }
  const fallback = {
    provider: 'no network (own loopback only)',
    none: 'no network (own loopback only)',
    allowed: 'the whole permitted set',
  }[byDefault];
  return ok('network', `a local sandbox created without network gets ${fallback}; ${allowed}; see sandbox-mcp network`);
}
