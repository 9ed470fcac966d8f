// At server start: one stderr line when the default provider certainly cannot work here, pointing
// to `sandbox-mcp doctor`. It reuses the doctor's cheap checks (a few stat and /proc reads, no
// process started), so clients that start a server per call pay nothing noticeable. The one
// exception is Ubuntu's AppArmor switch: only a real try tells whether bwrap's profile allows user
// namespaces, so where the switch is on the doctor's try runs, in the background: the server
// never waits for it.
import { resolve } from 'node:path';
import type { ServerConfig } from '../../config/config.js';
import { isProviderError } from '../../providers/provider-error.js';
import { defaultKeeperScript } from '../../providers/local/local-provider.js';
import { defaultStateDir } from '../../providers/local/sandbox/state-dir.js';
import { preflight } from '../../providers/local/system/preflight.js';
import { definedFields } from '../../util/defined-fields.js';
import { checkUserNamespaces } from './bubblewrap-checks.js';
import type { Check } from './check.js';
import { satisfiesRange, supportedNodeRange } from './node-version.js';
import { checkStateDir } from './state-dir-check.js';
import { isAppArmorRestrictingUserns, usernsSysctlFix } from './userns-sysctl.js';

/** The system readings the warning's AppArmor branch depends on (the tests substitute them). */
export interface StartupProbes {
  isAppArmorRestrictingUserns(): boolean;
  checkUserNamespaces(bwrap: string, setpriv: string | null, isRoot: boolean): Promise<Check>;
}

const SYSTEM_PROBES: StartupProbes = { isAppArmorRestrictingUserns, checkUserNamespaces };

type Reason = { now: string } | { tryUserns: { bwrap: string; setpriv: string } } | undefined;

function whyLocalCannotWork(config: ServerConfig, probes: StartupProbes): Reason {
  const isRoot = process.getuid?.() === 0;
  let tools: { bwrap: string; setpriv: string };
  try {
    tools = preflight({
      toolOverrides: definedFields({ bwrap: config.bwrapPath }),
      identity: { uid: 0, gid: 0, dropPrivileges: isRoot },
      keeperScript: defaultKeeperScript(),
      shell: '/bin/sh',
    });
  } catch (e) {
    return { now: isProviderError(e) ? e.suggestion : 'its prerequisites could not be checked.' };
  }
  const sysctl = usernsSysctlFix();
  if (sysctl) return { now: `The kernel refuses bubblewrap's user namespaces (${sysctl}).` };
  // The provider refuses a state directory others may write: every local call would fail.
  const state = checkStateDir(resolve(config.stateDir ?? defaultStateDir()));
  if (state.status === 'fail') return { now: `The state directory ${state.message}` };
  return probes.isAppArmorRestrictingUserns() ? { tryUserns: tools } : undefined;
}

function whyProviderCannotWork(config: ServerConfig, probes: StartupProbes): Reason {
  const range = supportedNodeRange();
  if (!satisfiesRange(process.versions.node, range)) {
    return { now: `Node.js ${process.versions.node} is not supported (supported: ${range}).` };
  }
  if (config.defaultProvider === 'e2b') {
    return config.e2b.apiKey ? undefined : { now: 'E2B_API_KEY is not set, and the default provider is e2b.' };
  }
  return whyLocalCannotWork(config, probes);
}

function warningLine(config: ServerConfig, why: string): string {
  return `sandbox-mcp: warning: the ${config.defaultProvider} provider cannot work here: ${why} Run \`sandbox-mcp doctor\` for every check.\n`;
}

/**
 * The warning line (with its newline) when the default provider cannot work here, else undefined.
 * Resolves at once from the cheap checks; only where AppArmor restricts user namespaces does it
 * first try one, as the doctor does (a few milliseconds).
 */
export async function startupWarning(config: ServerConfig, probes: StartupProbes = SYSTEM_PROBES): Promise<string | undefined> {
  const reason = whyProviderCannotWork(config, probes);
  if (reason === undefined) return undefined;
  if ('now' in reason) return warningLine(config, reason.now);
  const isRoot = process.getuid?.() === 0;
  const userns = await probes.checkUserNamespaces(reason.tryUserns.bwrap, reason.tryUserns.setpriv, isRoot);
  if (userns.status !== 'fail') return undefined;
  const fix = (userns.fix ?? '').replace(/\.$/, '');
  return warningLine(config, `${userns.message}; ${fix}.`);
}

/** Writes the start-up warning to stderr when there is one; never delays or fails the server's start. */
export function warnAtStartup(config: ServerConfig): void {
  startupWarning(config).then(
    (line) => {
      if (line) process.stderr.write(line);
    },
    () => {
      // A check that could not run is the doctor's to report; the server starts regardless.
    },
  );
}
