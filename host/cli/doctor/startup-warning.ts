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
import { resolveLimitSettings } from '../../providers/local/limits/settings.js';
import { canLimitMemory, describeCgroups } from '../../providers/local/system/cgroups.js';
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

/**
 * The warning line (with its newline) when local sandboxes, the default, would get memory limits
 * that nothing enforces here: no memory cgroup can be made (a server that is not root, on cgroup
 * v1 or without a delegated v2 subtree). Names the limits configured, set or by default.
 */
export function memoryLimitWarning(config: ServerConfig, canLimit: () => boolean = canLimitMemory): string | undefined {
  if (config.defaultProvider !== 'local' || process.platform !== 'linux' || canLimit()) return undefined;
  const limits = config.localLimits ?? {};
  const settings = resolveLimitSettings(limits);
  const perSandbox = limits.memoryMb !== undefined ? `--sandbox-memory ${settings.memoryMb}` : `the default of ${settings.memoryMb} MB`;
  const total =
    limits.maxTotalMemoryMb !== undefined ? `--max-total-memory ${settings.maxTotalMemoryMb}` : `${settings.maxTotalMemoryMb} MB`;
  return (
    `sandbox-mcp: warning: local sandboxes get no memory limit here: no memory cgroup can be made (${process.getuid?.() === 0 ? 'root' : 'not root'}, ` +
    `${cgroupVersionText()}), ` +
    `so the per-sandbox memory limit (${perSandbox}) and the limit of all sandboxes together (${total}) are not enforced, and create_sandbox with memory or cpu is unsupported; ` +
    "the host's OOM killer chooses sandbox commands first. Run the server as root, or on cgroup v2 give it a subtree with memory delegated " +
    '(e.g. systemd-run --user --scope -p Delegate=yes sandbox-mcp). Run `sandbox-mcp doctor` for every check.\n'
  );
}

function cgroupVersionText(): string {
  const { version } = describeCgroups();
  return version === 'v2' ? 'no cgroup v2 subtree with memory delegated' : version === 'none' ? 'no cgroups' : `cgroup ${version}`;
}

/** Writes the start-up warnings to stderr when there are any; never delays or fails the server's start. */
export function warnAtStartup(config: ServerConfig): void {
  startupWarning(config).then(
    (line) => {
      if (line) process.stderr.write(line);
      // Only a provider that can work has limits worth warning about.
      else {
        const memory = memoryLimitWarning(config);
        if (memory) process.stderr.write(memory);
      }
    },
    () => {
      // A check that could not run is the doctor's to report; the server starts regardless.
    },
  );
}
