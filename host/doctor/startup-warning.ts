// At server start: one stderr line when the default provider certainly cannot work here, pointing
// to `sandbox-mcp doctor`. Cheap on purpose (a few stat and /proc reads, no process started), so
// clients that start a server per call pay nothing noticeable; the doctor does the real tries.
import type { ServerConfig } from '../config.js';
import { isProviderError } from '../errors.js';
import { defaultKeeperScript } from '../providers/local/local-provider.js';
import { preflight } from '../providers/local/system/preflight.js';
import { definedFields } from '../util/defined-fields.js';
import { usernsSysctlFix } from './userns-sysctl.js';
import { satisfiesRange, supportedNodeRange } from './node-version.js';

function whyProviderCannotWork(config: ServerConfig): string | undefined {
  const range = supportedNodeRange();
  if (!satisfiesRange(process.versions.node, range)) return `Node.js ${process.versions.node} is not supported (supported: ${range}).`;
  if (config.defaultProvider === 'e2b') return config.e2b.apiKey ? undefined : 'E2B_API_KEY is not set, and the default provider is e2b.';
  try {
    const isRoot = process.getuid?.() === 0;
    preflight({
      toolOverrides: definedFields({ bwrap: config.bwrapPath }),
      identity: { uid: 0, gid: 0, dropPrivileges: isRoot },
      keeperScript: defaultKeeperScript(),
      shell: '/bin/sh',
    });
  } catch (e) {
    return isProviderError(e) ? e.suggestion : 'its prerequisites could not be checked.';
  }
  const sysctl = usernsSysctlFix();
  return sysctl ? `The kernel refuses bubblewrap's user namespaces (${sysctl}).` : undefined;
}

/** The warning line (with its newline) when the default provider cannot work here, else undefined. */
export function startupWarning(config: ServerConfig): string | undefined {
  const why = whyProviderCannotWork(config);
  if (why === undefined) return undefined;
  return `sandbox-mcp: warning: the ${config.defaultProvider} provider cannot work here: ${why} Run \`sandbox-mcp doctor\` for every check.\n`;
}
