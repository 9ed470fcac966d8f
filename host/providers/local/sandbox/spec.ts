// A sandbox's spec: what it is made of, fixed at create. The provider builds it (the caller's
// choices plus what this host needs hidden or bound back inside), the state directory holds it
// as spec.json, and the keeper builds the sandbox from it.
import { lstatSync, realpathSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { definedFields } from '../../../util/defined-fields.js';
import type { NetworkMode } from '../../provider.js';
import { HIDDEN_PATHS, SCRATCH_PATHS } from '../launch/bwrap-args.js';
import type { Identity, ToolPaths } from '../launch/command-lines.js';
import type { SandboxLimits } from '../limits/sandbox-limits.js';

/** Immutable description of a sandbox, written before its keeper starts. */
export interface SandboxSpec {
  version: 1;
  id: string;
  createdAtMs: number;
  envs: Record<string, string>;
  /** What create asked for: the keeper fails rather than start without these. */
  cpu: number | null;
  memoryMb: number | null;
  identity: Identity;
  tools: ToolPaths;
  shell: string;
  hidePaths: string[];
  roBindPaths: string[];
  hideVarRun: boolean;
  /** Absent in specs written before sandboxes had a network of their own: those share the host's. */
  network?: NetworkMode;
  /** The principal that created it (CreateOpts.owner); absent: none recorded. */
  owner?: string;
  /**
   * The egress allow-list (canonical entries, see network-policy.ts) its keeper's proxy enforces;
   * absent or empty: no egress proxy. Only in isolated sandboxes.
   */
  allowOut?: string[];
  /** Resource bounds (absent in specs written before sandboxes had them: none were applied). */
  limits?: SandboxLimits;
  /** false: the keeper starts no resident agent (LocalProviderOpts.residentAgent); absent: it does. */
  resident?: false;
}

/** The network mode a sandbox was created with (see SandboxSpec.network). */
export function specNetwork(spec: SandboxSpec): NetworkMode {
  return spec.network === undefined || spec.network === 'host' ? 'host' : 'isolated';
}

/**
 * The per-sandbox choices of a spec; the rest comes from the provider's settings and this host.
 * An `allowOut` (even empty) makes the sandbox isolated whatever the provider's network mode.
 */
export type SandboxSpecOpts = Pick<SandboxSpec, 'id' | 'createdAtMs' | 'envs' | 'cpu' | 'memoryMb' | 'identity' | 'tools' | 'owner'> & {
  allowOut?: readonly string[];
  limits: SandboxLimits;
};

/** What a new spec takes from the provider's settings (LocalSettings has each of these). */
export interface SpecSettings {
  readonly stateDir: string;
  readonly residentAgent?: boolean;
  readonly nodePath: string;
  /** The provider's identity template: whether sandboxes drop root decides what can be bound back. */
  readonly identity: Identity;
  readonly shell: string;
  readonly network: NetworkMode;
}

/** The complete spec of a new sandbox. */
export function buildSandboxSpec(settings: SpecSettings, opts: SandboxSpecOpts): SandboxSpec {
  return {
    version: 1,
    id: opts.id,
    createdAtMs: opts.createdAtMs,
    envs: opts.envs,
    cpu: opts.cpu,
    memoryMb: opts.memoryMb,
    identity: opts.identity,
    tools: opts.tools,
    shell: settings.shell,
    hidePaths: hidePaths(settings.stateDir),
    roBindPaths: roBindPaths(settings.nodePath, settings.identity.dropPrivileges),
    hideVarRun: isRealDir('/var/run'),
    network: opts.allowOut !== undefined ? 'isolated' : settings.network,
    limits: opts.limits,
    ...definedFields({ allowOut: opts.allowOut?.length ? [...opts.allowOut] : undefined, owner: opts.owner }),
    ...(settings.residentAgent === false ? { resident: false as const } : {}),
  };
}

function isUnder(path: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => path === p || path.startsWith(p + '/'));
}

/** True when every directory on the way to `path` can be searched by "others" (the dropped uid). */
function traversableByOthers(path: string): boolean {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    try {
      if ((statSync(dir).mode & 0o001) === 0) return false;
    } catch {
      return false;
    }
    if (dir === '/') return true;
  }
}

function isRealDir(path: string): boolean {
  try {
    const st = lstatSync(path);
    return st.isDirectory() && !st.isSymbolicLink();
  } catch {
    return false;
  }
}

/** The state directory must be invisible inside sandboxes wherever it lives. */
function hidePaths(stateDir: string): string[] {
  let state = stateDir;
  try {
    state = realpathSync(state);
  } catch {
    // Use it as given.
  }
  return isUnder(state, [...HIDDEN_PATHS, ...SCRATCH_PATHS]) ? [] : [state];
}

/** node's prefix, bound back when the sandbox's hidden paths (/home, /root…) would hide it. */
function roBindPaths(nodePath: string, dropPrivileges: boolean): string[] {
  let node: string;
  try {
    node = realpathSync(nodePath);
  } catch {
    return [];
  }
  if (!isUnder(node, [...HIDDEN_PATHS, ...SCRATCH_PATHS])) return [];
  const prefix = dirname(dirname(node));
  if (dropPrivileges && !traversableByOthers(join(prefix, 'bin'))) return [];
  return [prefix];
}
