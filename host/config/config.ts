// Server configuration from flags and environment. Credentials live here, never in tool arguments.
import { realpathSync } from 'node:fs';
import { isAbsolute } from 'node:path';
import { SECRET_NAME_PATTERN, LIMITS, RESIDENT_IDLE_EXIT_MAX_S } from '../../shared/limits.js';
import { isProviderError } from '../providers/provider-error.js';
import { resolveAllowedRoots, WORKSPACE_ALLOW_ENV, WORKSPACE_ALLOW_FLAG } from '../providers/workspace-policy.js';
import { DEFAULT_MAX_WAITING_GETS, LIMIT_OPTIONS } from './limit-options.js';
import { ALLOW_LIST_PRESETS, expandAllowList } from '../providers/network-policy.js';
import { resolveLimitSettings, type LimitOpts } from '../providers/local/limits/settings.js';
import { isNetworkMode, NETWORK_MODES, type NetworkMode } from '../providers/provider.js';
import { PROVIDER_IDS, type ProviderId } from '../providers/sandbox-ref.js';
import { definedFields } from '../util/defined-fields.js';
import { DEBUG_ENV } from '../util/log.js';
import { switchValue } from '../util/switch.js';

export interface ServerConfig {
  /** The provider that unqualified ids and create_sandbox without `provider` use. */
  defaultProvider: ProviderId;
  /** Local provider state directory override (SANDBOX_MCP_STATE_DIR). */
  stateDir?: string;
  /** Where local templates are kept instead of the state directory's `templates` (--template-dir, SANDBOX_MCP_TEMPLATE_DIR). */
  templatesDir?: string;
  /** The most MB of snapshot layers the templates directory may hold (--max-snapshot-storage, SANDBOX_MCP_MAX_SNAPSHOT_STORAGE). */
  maxSnapshotStorageMb?: number;
  /** Local sandboxes' network: their own (default) or the host's (SANDBOX_MCP_LOCAL_NETWORK=host). */
  localNetwork: NetworkMode;
  /** The bubblewrap binary local sandboxes use instead of searching PATH (SANDBOX_MCP_BWRAP). */
  bwrapPath?: string;
  /** Host paths every local sandbox sees read-only (--sandbox-ro-bind, SANDBOX_MCP_SANDBOX_RO_BIND); absent: none. */
  sandboxRoBinds?: string[];
  /** Sandboxes a session created outlive it, until their own deadline (--keep-sandboxes). */
  keepSandboxes?: boolean;
  /**
   * Local sandboxes this server creates run no resident agent (SANDBOX_MCP_RESIDENT_AGENT=0): every
   * agent call and command then starts processes of its own, as in sandboxes of older servers.
   */
  noResidentAgent?: boolean;
  /**
   * After this many seconds without a call, a local sandbox's resident agent exits, and its keeper
   * starts it again when a server next connects (SANDBOX_MCP_RESIDENT_IDLE_EXIT_S; absent: the
   * provider's default, RESIDENT_IDLE_EXIT_DEFAULT_S; 0: it stays up).
   */
  residentIdleExitS?: number;
  /** Local sandboxes' resource limits given by flags or environment (the rest keep the provider's defaults). */
  localLimits?: LimitOpts;
  /** get_task calls waiting at once per sandbox (default DEFAULT_MAX_WAITING_GETS). */
  maxWaitingGets?: number;
  e2b: { apiKey?: string; domain?: string };
  /** Values of this server's own secret-named environment variables, masked in task and exec output. */
  secretValues: string[];
  /**
   * run_command/run_code's `background_after` when a call gives none (--background-after,
   * SANDBOX_MCP_BACKGROUND_AFTER; default BACKGROUND_AFTER_DEFAULT_S): a call still running then
   * returns a task handle, so no command is lost at a client's cut. 0: calls wait.
   */
  backgroundAfterS: number;
  /** How often a call with a progress token reports progress (default 10 s); SANDBOX_MCP_PROGRESS_INTERVAL_MS is a test knob, not in --help. */
  progressIntervalMs?: number;
  /** Sandbox egress; absent: nothing is permitted and creates keep their provider's default. */
  network?: ServerNetworkConfig;
  /**
   * The host directories (real paths) create_sandbox's `workspace` may name, or lie below
   * (--workspace-allow / SANDBOX_MCP_WORKSPACE_ALLOW); empty: no workspaces.
   */
  workspaceAllow?: string[];
}

/** What a create_sandbox without `network` gets: its provider's default, no egress, or every permitted entry. */
export const NETWORK_DEFAULTS = ['provider', 'none', 'allowed'] as const;

/** The egress sandboxes of this server may have. */
export interface ServerNetworkConfig {
  /** Canonical entries a create's `network.allow_out` may use (--network-allow / SANDBOX_MCP_NETWORK_ALLOW). */
  permitted: string[];
  /** --network-default / SANDBOX_MCP_NETWORK_DEFAULT. */
  default: (typeof NETWORK_DEFAULTS)[number];
}

/**
 * The bounds of `background_after`, in seconds, for the tool argument and the server option alike:
 * 0 means the call waits (never a task). The maximum is the task's: a promoted call goes on as a task.
 */
export const BACKGROUND_AFTER_MIN_S = 0;
export const BACKGROUND_AFTER_MAX_S = LIMITS.taskTimeoutMaxS;
/**
 * The server's background_after unless configured: below the 60 s at which common clients cut a
 * call, so no command is lost at that cut. Through the resident agent a promotable call that ends
 * at once costs a few milliseconds more than the plain call (a supervisor booted ahead takes it:
 * about 3 ms, 1.34-1.45x, in docs/performance.md). A sandbox
 * without a resident runs such calls on the fast path instead (see promote.ts).
 */
export const BACKGROUND_AFTER_DEFAULT_S = 50;

/** Thrown for a bad flag or environment value; the CLI prints it and exits 2. */
export class ConfigError extends Error {}

/** What the command line adds to the environment's configuration (a flag wins over its variable). */
export interface ConfigFlags {
  provider?: string | undefined;
  keepSandboxes?: boolean | undefined;
  /** The limit flags (see LIMIT_OPTIONS) by name, as given. */
  limits?: Readonly<Record<string, string>>;
  /** --background-after, raw (validated here, as its variable is). */
  backgroundAfter?: string | undefined;
  /** --network-allow, repeatable, each a comma-separated list. */
  networkAllow?: string[] | undefined;
  networkDefault?: string | undefined;
  /** --workspace-allow, repeatable, each a comma-separated list. */
  workspaceAllow?: string[] | undefined;
  /** --template-dir, as given. */
  templateDir?: string | undefined;
  /** --sandbox-ro-bind, each as given. */
  sandboxRoBinds?: string[] | undefined;
  /** --max-snapshot-storage, raw (validated here, as its variable is). */
  maxSnapshotStorage?: string | undefined;
}

/**
 * The limits given by flags or environment: integers of at least each option's minimum, and a
 * default memory no larger than the maximum. Throws ConfigError naming the flag and variable.
 */
function loadLimits(env: NodeJS.ProcessEnv, flags: Readonly<Record<string, string>>): { localLimits: LimitOpts; maxWaitingGets: number } {
  const localLimits: LimitOpts = {};
  let maxWaitingGets = DEFAULT_MAX_WAITING_GETS;
  for (const o of LIMIT_OPTIONS) {
    const text = flags[o.flag] ?? env[o.env];
    if (text === undefined || text === '') continue;
    const n = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
    if (!Number.isSafeInteger(n) || n < o.min) throw new ConfigError(`--${o.flag} (${o.env}) must be an integer of at least ${o.min}`);
    if (o.key === 'maxWaitingGets') maxWaitingGets = n;
    else localLimits[o.key] = n;
  }
  try {
    resolveLimitSettings(localLimits);
  } catch (e) {
    if (!isProviderError(e)) throw e;
    throw new ConfigError(
      e.code === 'max_memory_above_total'
        ? '--max-sandbox-memory (SANDBOX_MCP_MAX_SANDBOX_MEMORY) must not be above --max-total-memory (SANDBOX_MCP_MAX_TOTAL_MEMORY)'
        : '--sandbox-memory (SANDBOX_MCP_SANDBOX_MEMORY) must not be above --max-sandbox-memory (SANDBOX_MCP_MAX_SANDBOX_MEMORY)',
    );
  }
  return { localLimits, maxWaitingGets };
}

/** Reads the configuration from the environment and the command line's flags. */
export function loadConfig(env: NodeJS.ProcessEnv, flags: ConfigFlags = {}): ServerConfig {
  const provider = flags.provider ?? env.SANDBOX_MCP_PROVIDER ?? 'local';
  if (!(PROVIDER_IDS as readonly string[]).includes(provider)) {
    throw new ConfigError(`--provider (SANDBOX_MCP_PROVIDER) must be one of: ${PROVIDER_IDS.join(', ')}`);
  }
  const localNetwork = env.SANDBOX_MCP_LOCAL_NETWORK || NETWORK_MODES[0];
  if (!isNetworkMode(localNetwork)) {
    throw new ConfigError(`SANDBOX_MCP_LOCAL_NETWORK must be one of: ${NETWORK_MODES.join(', ')}`);
  }
  const bwrapPath = env.SANDBOX_MCP_BWRAP || undefined;
  if (bwrapPath !== undefined && !isAbsolute(bwrapPath)) throw new ConfigError('SANDBOX_MCP_BWRAP must be an absolute path');
  // Relative, it would name another directory from every working directory: a server started by a
  // client app and `sandbox-mcp ls` in a terminal would not see each other's sandboxes.
  const stateDir = env.SANDBOX_MCP_STATE_DIR || undefined;
  if (stateDir !== undefined && !isAbsolute(stateDir)) throw new ConfigError('SANDBOX_MCP_STATE_DIR must be an absolute path');
  const keepSandboxes = flags.keepSandboxes || parseSwitch(env, 'SANDBOX_MCP_KEEP_SANDBOXES');
  // Only checked here: the server and its keepers read it where they make their log (isDebugOn),
  // and a keeper takes a bad value for off rather than fail.
  parseSwitch(env, DEBUG_ENV);
  const templatesDir = flags.templateDir ?? (env.SANDBOX_MCP_TEMPLATE_DIR || undefined);
  if (templatesDir !== undefined && !isAbsolute(templatesDir)) {
    throw new ConfigError('--template-dir (SANDBOX_MCP_TEMPLATE_DIR) must be an absolute path');
  }
  return {
    defaultProvider: provider as ProviderId,
    localNetwork,
    network: loadNetworkConfig(env, flags),
    workspaceAllow: loadWorkspaceAllow(env, flags),
    ...definedFields({
      stateDir,
      bwrapPath,
      templatesDir,
      sandboxRoBinds: loadRoBinds(env, flags),
    }),
    keepSandboxes,
    ...(isSwitchedOff(env, 'SANDBOX_MCP_RESIDENT_AGENT') ? { noResidentAgent: true } : {}),
    ...loadLimits(env, flags.limits ?? {}),
    // An empty variable counts as unset.
    e2b: definedFields({ apiKey: env.E2B_API_KEY || undefined, domain: env.E2B_DOMAIN || undefined }),
    secretValues: secretValuesOf(env),
    backgroundAfterS: parseBackgroundAfter(flags.backgroundAfter ?? env.SANDBOX_MCP_BACKGROUND_AFTER) ?? BACKGROUND_AFTER_DEFAULT_S,
    ...definedFields({
      progressIntervalMs: parseProgressInterval(env.SANDBOX_MCP_PROGRESS_INTERVAL_MS),
      residentIdleExitS: parseResidentIdleExit(env.SANDBOX_MCP_RESIDENT_IDLE_EXIT_S),
      maxSnapshotStorageMb: parseSnapshotStorage(flags.maxSnapshotStorage ?? env.SANDBOX_MCP_MAX_SNAPSHOT_STORAGE),
    }),
  };
}

/** True when an on-by-default variable is 0 or false (unset, empty, 1 or true: on; anything else is refused). */
function isSwitchedOff(env: NodeJS.ProcessEnv, name: string): boolean {
  const value = (env[name] ?? '').toLowerCase();
  if (value === '' || value === '1' || value === 'true') return false;
  if (value === '0' || value === 'false') return true;
  throw new ConfigError(`${name} must be 1 or 0`);
}

/**
 * The host paths local sandboxes see read-only: --sandbox-ro-bind (repeatable) or else
 * SANDBOX_MCP_SANDBOX_RO_BIND (colon-separated); each absolute and existing, as the path itself
 * (its symlinks resolved, so that the sandbox shows what it names). Undefined when none.
 */
function loadRoBinds(env: NodeJS.ProcessEnv, flags: ConfigFlags): string[] | undefined {
  const fromFlag = flags.sandboxRoBinds !== undefined && flags.sandboxRoBinds.length > 0;
  const source = fromFlag ? '--sandbox-ro-bind' : 'SANDBOX_MCP_SANDBOX_RO_BIND';
  const items = fromFlag ? flags.sandboxRoBinds! : (env.SANDBOX_MCP_SANDBOX_RO_BIND ?? '').split(':').filter(Boolean);
  if (items.length === 0) return undefined;
  return items.map((item, i) => {
    let real: string;
    try {
      if (!isAbsolute(item) || item.includes('\0')) throw new Error('not absolute');
      real = realpathSync(item);
    } catch {
      throw new ConfigError(`${source}: item ${i + 1} must be the absolute path of an existing file or directory`);
    }
    if (real === '/') throw new ConfigError(`${source}: item ${i + 1} is the host's root, which would show every host file`);
    return real;
  });
}

/** An on/off variable: unset, empty, 0 or false is off; 1 or true is on; anything else is refused. */
function parseSwitch(env: NodeJS.ProcessEnv, name: string): boolean {
  const value = switchValue(env[name]);
  if (value === undefined) throw new ConfigError(`${name} must be 1 or 0`);
  return value;
}

function parseBackgroundAfter(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < BACKGROUND_AFTER_MIN_S || value > BACKGROUND_AFTER_MAX_S) {
    throw new ConfigError(
      `--background-after / SANDBOX_MCP_BACKGROUND_AFTER must be a whole number of seconds, ${BACKGROUND_AFTER_MIN_S}-${BACKGROUND_AFTER_MAX_S} (0: calls wait)`,
    );
  }
  return value;
}

function parseSnapshotStorage(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw.trim());
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value)) {
    throw new ConfigError('--max-snapshot-storage (SANDBOX_MCP_MAX_SNAPSHOT_STORAGE) must be a whole number of MB (0: no snapshots)');
  }
  return value;
}

function parseResidentIdleExit(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value > RESIDENT_IDLE_EXIT_MAX_S) {
    throw new ConfigError(
      `SANDBOX_MCP_RESIDENT_IDLE_EXIT_S must be a whole number of seconds, 0-${RESIDENT_IDLE_EXIT_MAX_S} (0: it stays up)`,
    );
  }
  return value;
}

function parseProgressInterval(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < 1 || value > 3_600_000) {
    throw new ConfigError('SANDBOX_MCP_PROGRESS_INTERVAL_MS must be a whole number of milliseconds, 1-3600000');
  }
  return value;
}

/** The values of secret-named variables long enough to mask without masking ordinary text. */
export function secretValuesOf(vars: Record<string, string | undefined>): string[] {
  const values = new Set<string>();
  for (const [name, value] of Object.entries(vars)) {
    if (value && SECRET_NAME_PATTERN.test(name) && Buffer.byteLength(value) >= LIMITS.secretMinBytes) values.add(value);
  }
  return [...values];
}

/** The permitted set and the default egress, from --network-allow/--network-default or their variables. */
function loadNetworkConfig(env: NodeJS.ProcessEnv, flags: ConfigFlags): ServerNetworkConfig {
  const fromFlag = flags.networkAllow !== undefined && flags.networkAllow.length > 0;
  const source = fromFlag ? '--network-allow' : 'SANDBOX_MCP_NETWORK_ALLOW';
  const items = (fromFlag ? flags.networkAllow! : [env.SANDBOX_MCP_NETWORK_ALLOW ?? ''])
    .flatMap((list) => list.split(','))
    .map((item) => item.trim())
    .filter(Boolean);
  const expanded = expandAllowList(items);
  if ('invalidIndex' in expanded) {
    throw new ConfigError(
      `${source}: item ${expanded.invalidIndex + 1} is not a host name, *.suffix, IPv4 or [IPv6] address with an optional :port, ` +
        `or one of the presets ${Object.keys(ALLOW_LIST_PRESETS).join(', ')}`,
    );
  }
  const defaultText = flags.networkDefault ?? (env.SANDBOX_MCP_NETWORK_DEFAULT || 'provider');
  if (!(NETWORK_DEFAULTS as readonly string[]).includes(defaultText)) {
    throw new ConfigError(
      `${flags.networkDefault !== undefined ? '--network-default' : 'SANDBOX_MCP_NETWORK_DEFAULT'} must be one of: ${NETWORK_DEFAULTS.join(', ')}`,
    );
  }
  return { permitted: expanded.entries, default: defaultText as ServerNetworkConfig['default'] };
}

/** The permitted workspace directories, from --workspace-allow or its variable, as real paths. */
function loadWorkspaceAllow(env: NodeJS.ProcessEnv, flags: ConfigFlags): string[] {
  const fromFlag = flags.workspaceAllow !== undefined && flags.workspaceAllow.length > 0;
  const source = fromFlag ? WORKSPACE_ALLOW_FLAG : WORKSPACE_ALLOW_ENV;
  const items = (fromFlag ? flags.workspaceAllow! : [env[WORKSPACE_ALLOW_ENV] ?? ''])
    .flatMap((list) => list.split(','))
    .map((item) => item.trim())
    .filter(Boolean);
  const resolved = resolveAllowedRoots(items);
  if ('invalidIndex' in resolved) {
    const what = resolved.problem === 'not_absolute' ? 'is not an absolute path' : 'is not an existing directory';
    throw new ConfigError(`${source}: item ${resolved.invalidIndex + 1} ${what}`);
  }
  return resolved.roots;
}
