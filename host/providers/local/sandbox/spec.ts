// A sandbox's spec: what it is made of, fixed at create. The provider builds it (the caller's
// choices plus what this host needs hidden or bound back inside), the state directory holds it
// as spec.json, and the keeper builds the sandbox from it.
import { realpathSync } from 'node:fs';
import { definedFields } from '../../../util/defined-fields.js';
import type { NetworkMode } from '../../provider.js';
import type { Identity, ToolPaths } from '../launch/command-lines.js';
import type { SandboxLimits } from '../limits/sandbox-limits.js';
import { BASE_TEMPLATE } from '../templates/base-template.js';

/**
 * The root of a template sandbox: the template's layers under a writable layer of its own
 * (helpers/mount-root.pl). `idrange`: a root server; the layers keep their native owners and the
 * sandbox's ids 0-65535 are the host ids identity.uid… (a block of its own). `userns`: a server that
 * is not root; the layers are owned by its uid, which is root inside.
 */
export interface TemplateRoot {
  /** The template's layer directories on the host, top first. */
  layers: string[];
  mode: 'idrange' | 'userns';
  /**
   * An empty directory the sandbox's first id can reach (idrange): bwrap, running as that id,
   * binds the root by path, and the state directory is out of its reach, so the launch helper
   * shows the root there, in its own mount namespace (the host sees the directory empty).
   */
  mountPoint?: string;
}

/**
 * A sandbox's workspace (rootfs/workspace.ts): the person's directory shown at WORKSPACE_PATH as
 * an overlay whose upper lives on the sandbox's tmpfs, made by the launch helper.
 */
export interface SpecWorkspace {
  /** The host directory (a real path, checked against the server's permitted ones). */
  hostPath: string;
  /** Its owner at create: a root server shows that owner's files as the sandbox user's (an idmapped lower). */
  uid: number;
  gid: number;
  /** Where the helper shows its tmpfs to bwrap running as the sandbox's uid (a root server); absent: in its state directory. */
  mountPoint?: string;
}

/** Immutable description of a sandbox, written before its keeper starts. */
export interface SandboxSpec {
  version: 1;
  id: string;
  createdAtMs: number;
  /** The template it runs on: `base` (the host's system directories) or a stored template's name. */
  template?: string;
  /** Absent for base sandboxes. */
  root?: TemplateRoot;
  envs: Record<string, string>;
  /** What create asked for: the keeper fails rather than start without these. */
  cpu: number | null;
  memoryMb: number | null;
  identity: Identity;
  tools: ToolPaths;
  shell: string;
  /** Host paths covered by an empty tmpfs inside (the server's own directories, where a bound path holds them). */
  hidePaths: string[];
  /** Host paths shown read-only at the same place (--sandbox-ro-bind). */
  roBindPaths: string[];
  /** The agent's runtime on the host (rootfs/agent-runtime.ts), bound at AGENT_RUNTIME_DIR; absent in older specs. */
  runtimeDir?: string;
  /** The base view's /etc on the host (rootfs/base-etc.ts); base sandboxes only. */
  baseEtcDir?: string;
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
  /** Seconds without a call after which the keeper stops the resident (0: never); absent: RESIDENT_IDLE_EXIT_DEFAULT_S. */
  residentIdleExitS?: number;
  /** Its workspace; absent: none. */
  workspace?: SpecWorkspace;
  /** An image template's WorkingDir: where a command without cwd runs (a workspace wins); absent: the home. */
  workingDir?: string;
  /** An image template's user, whose ids its commands run as (templates/images/image-user.ts imageUserPlan); absent: root inside. */
  user?: SpecUser;
}

/** The image's user a template sandbox's commands run as: ids inside its namespace, and its passwd entry's name and home. */
export interface SpecUser {
  uid: number;
  gid: number;
  /** USER and LOGNAME; absent: a number the image's passwd does not list (they are left unset). */
  name?: string;
  /** HOME, unless the image's Env sets one. */
  home: string;
  /** True when `home` was a real directory of the image: then where a command without cwd runs (else `/`). */
  homeIsDir: boolean;
}

/** The network mode a sandbox was created with (see SandboxSpec.network). */
export function specNetwork(spec: SandboxSpec): NetworkMode {
  return spec.network === undefined || spec.network === 'host' ? 'host' : 'isolated';
}

/** The template a sandbox runs on (`base` for specs that name none). */
export function specTemplate(spec: SandboxSpec): string {
  return spec.template ?? BASE_TEMPLATE;
}

/**
 * The per-sandbox choices of a spec; the rest comes from the provider's settings and this host.
 * An `allowOut` (even empty) makes the sandbox isolated whatever the provider's network mode.
 */
export type SandboxSpecOpts = Pick<
  SandboxSpec,
  | 'id'
  | 'createdAtMs'
  | 'envs'
  | 'cpu'
  | 'memoryMb'
  | 'identity'
  | 'tools'
  | 'owner'
  | 'shell'
  | 'root'
  | 'runtimeDir'
  | 'baseEtcDir'
  | 'workspace'
  | 'workingDir'
  | 'user'
> & {
  template: string;
  allowOut?: readonly string[];
  limits: SandboxLimits;
};

/** What a new spec takes from the provider's settings (LocalSettings has each of these). */
export interface SpecSettings {
  readonly residentAgent?: boolean;
  readonly residentIdleExitS?: number;
  readonly network: NetworkMode;
  /** The person's read-only host paths (--sandbox-ro-bind). */
  readonly roBinds: readonly string[];
  /** The server's own directories, which no sandbox may see (covered where a bound path holds one). */
  readonly privateDirs: readonly string[];
}

/** The complete spec of a new sandbox. */
export function buildSandboxSpec(settings: SpecSettings, opts: SandboxSpecOpts): SandboxSpec {
  return {
    version: 1,
    id: opts.id,
    createdAtMs: opts.createdAtMs,
    template: opts.template,
    envs: opts.envs,
    cpu: opts.cpu,
    memoryMb: opts.memoryMb,
    identity: opts.identity,
    tools: opts.tools,
    shell: opts.shell,
    hidePaths: hidePaths(settings.privateDirs, settings.roBinds),
    roBindPaths: [...settings.roBinds],
    network: opts.allowOut !== undefined ? 'isolated' : settings.network,
    limits: opts.limits,
    ...definedFields({
      root: opts.root,
      runtimeDir: opts.runtimeDir,
      baseEtcDir: opts.baseEtcDir,
      allowOut: opts.allowOut?.length ? [...opts.allowOut] : undefined,
      owner: opts.owner,
      workspace: opts.workspace,
      workingDir: opts.workingDir,
      user: opts.user,
      residentIdleExitS: settings.residentIdleExitS,
    }),
    ...(settings.residentAgent === false ? { resident: false as const } : {}),
  };
}

function isUnder(path: string, prefixes: readonly string[]): boolean {
  return prefixes.some((p) => p === '/' || path === p || path.startsWith(p + '/'));
}

/** The server's directories that a bound host path would show: each is covered inside. */
function hidePaths(privateDirs: readonly string[], roBinds: readonly string[]): string[] {
  const real = (p: string): string => {
    try {
      return realpathSync(p);
    } catch {
      return p;
    }
  };
  const shown = [...new Set(privateDirs.map(real))].filter((dir) => isUnder(dir, roBinds.map(real)));
  // One cover hides what is below it too (another would leave its mount point in the first).
  return shown.filter((dir) => !shown.some((other) => other !== dir && isUnder(dir, [other])));
}
