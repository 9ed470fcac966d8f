// The local provider's options and the settings resolved from them once, at construction: every
// other module of the provider reads these, never the options themselves.
import { existsSync, openSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { isNetworkMode, NETWORK_MODES, SANDBOX_LIFETIME_DEFAULT_S, type NetworkMode } from '../provider.js';
import type { Identity, ToolPaths } from './launch/command-lines.js';
import { nodeBinDirsOf } from './launch/environment.js';
import { resolveLimitSettings, type LimitOpts, type LimitSettings } from './limits/settings.js';
import type { EgressFailureListener } from './network/failure-reporter.js';
import { defaultStateDir, sandboxesDir } from './sandbox/state-dir.js';
import type { FdCover } from './system/inherited-fds.js';
import { inheritableFds } from './system/inherited-fds.js';
import { templatesDir } from './templates/store.js';
import { invalid } from './validation.js';
import { distDir } from '../../util/dist-files.js';
import { RESIDENT_IDLE_EXIT_DEFAULT_S, RESIDENT_IDLE_EXIT_MAX_S } from '../../../shared/limits.js';

/** Options of the local provider; every one has a working default. */
export interface LocalProviderOpts {
  /** State directory (default: $SANDBOX_MCP_STATE_DIR, $XDG_STATE_HOME/sandbox-mcp, ~/.local/state/sandbox-mcp). */
  stateDir?: string;
  /** Where templates are kept (default: `templates` in the state directory; templates/store.ts). */
  templatesDir?: string;
  /** The most MB of snapshot layers the templates directory may hold (default 10240; 0: no snapshots). */
  maxSnapshotStorageMb?: number;
  /** The built keeper entry (`node <keeperScript> <dir>`); default dist/keeper.cjs next to the host bundle. */
  keeperScript?: string;
  /** Node binary for keepers (default: this process's). */
  nodePath?: string;
  /** Lifetime of a sandbox when create gives none (default SANDBOX_LIFETIME_DEFAULT_S). */
  defaultTimeoutS?: number;
  /**
   * One fixed uid/gid for every sandbox when the host runs as root. By default each sandbox gets
   * a uid (and equal gid) of its own from an unassigned range (see SANDBOX_UID_BASE).
   */
  sandboxUid?: number;
  sandboxGid?: number;
  /** How long create waits for the keeper to report a ready sandbox (default 20 s). */
  startTimeoutMs?: number;
  /** How long kill waits for the keeper to finish before cleaning up itself (default 5 s). */
  killWaitMs?: number;
  /** Upper bound for one file operation (default 120 s). */
  fileOpTimeoutMs?: number;
  /** After a command exits, how long its output pipes may stay open (background children) (default 100 ms). */
  drainGraceMs?: number;
  /** Absolute paths of the system tools, instead of searching PATH (tests point these at fakes). */
  tools?: Partial<ToolPaths>;
  /**
   * Network of the sandboxes this instance creates (default `isolated`: only their own loopback).
   * `host` shares the host's network namespace: its interfaces, its loopback services and its
   * abstract Unix sockets. Recorded per sandbox, so every instance enters each one correctly.
   */
  network?: NetworkMode;
  /** Resource bounds of the sandboxes (limits/settings.ts); every one has a default. */
  limits?: LimitOpts;
  /** Hears each request a sandbox's egress proxy refused or could not get through, as its file records them (once per server process); default: nobody. */
  onEgressFailure?: EgressFailureListener;
  /**
   * false: sandboxes this instance creates run no resident agent (keeper/resident.ts), so every
   * agent call and command starts processes of its own, as in sandboxes of older servers (default true).
   */
  residentAgent?: boolean;
  /**
   * Seconds without a call after which a sandbox's resident agent exits (its keeper starts it
   * again when a server next connects); 0: it stays up (default RESIDENT_IDLE_EXIT_DEFAULT_S).
   */
  residentIdleExitS?: number;
  /** Host paths every sandbox sees read-only at the same place (absolute; --sandbox-ro-bind). */
  roBinds?: readonly string[];
}

/** The snapshot storage (MB of snapshot layers) a templates directory may hold when not configured. */
export const DEFAULT_MAX_SNAPSHOT_STORAGE_MB = 10_240;

/** LocalProviderOpts with every default applied; fixed for the life of a provider instance. */
export interface LocalSettings {
  readonly stateDir: string;
  /** The directory holding one state directory per sandbox (inside stateDir). */
  readonly sandboxes: string;
  /** The template store (templates/store.ts). */
  readonly templatesDir: string;
  readonly maxSnapshotStorageBytes: number;
  readonly keeperScript: string;
  readonly nodePath: string;
  readonly defaultTimeoutS: number;
  /** The fixed identity of every base sandbox, or (root without sandboxUid) the template of per-sandbox ones. */
  readonly identity: Identity;
  /** True when the server runs as root (template sandboxes then get a block of host ids each). */
  readonly isRoot: boolean;
  readonly roBinds: readonly string[];
  readonly uidPerSandbox: boolean;
  readonly startTimeoutMs: number;
  readonly killWaitMs: number;
  readonly fileOpTimeoutMs: number;
  readonly drainGraceMs: number;
  readonly toolOverrides: Partial<ToolPaths>;
  readonly network: NetworkMode;
  readonly limits: LimitSettings;
  readonly onEgressFailure: EgressFailureListener | undefined;
  readonly residentAgent: boolean;
  readonly residentIdleExitS: number;
  readonly shell: string;
  /** Directories of the node binary (as given and resolved), put on the sandbox's PATH. */
  readonly nodeBinDirs: string[];
  /** Descriptors our parent left open for children, covered in every keeper and command we start. */
  readonly cover: FdCover | undefined;
}

/** Path of dist/keeper.cjs in this installation or checkout. */
export function defaultKeeperScript(): string {
  return join(distDir(), 'keeper.cjs');
}

/** Applies the defaults; throws invalid_argument for an unknown network mode or a limit out of range. */
export function resolveSettings(opts: LocalProviderOpts): LocalSettings {
  const stateDir = resolve(opts.stateDir ?? defaultStateDir());
  const sandboxes = sandboxesDir(stateDir);
  const templates = resolve(templatesDir(stateDir, opts.templatesDir));
  const maxSnapshotStorageMb = opts.maxSnapshotStorageMb ?? DEFAULT_MAX_SNAPSHOT_STORAGE_MB;
  if (!Number.isSafeInteger(maxSnapshotStorageMb) || maxSnapshotStorageMb < 0)
    throw invalid('The snapshot storage cap must be a whole number of MB.');
  const keeperScript = opts.keeperScript ?? defaultKeeperScript();
  const nodePath = opts.nodePath ?? process.execPath;
  const defaultTimeoutS = opts.defaultTimeoutS ?? SANDBOX_LIFETIME_DEFAULT_S;
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const identity: Identity = isRoot
    ? { uid: opts.sandboxUid ?? 65534, gid: opts.sandboxGid ?? 65534, dropPrivileges: true }
    : { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, dropPrivileges: false };
  const uidPerSandbox = isRoot && opts.sandboxUid === undefined;
  const roBinds = [...(opts.roBinds ?? [])];
  if (roBinds.some((p) => !isAbsolute(p) || p.includes('\0')))
    throw invalid('The read-only paths of sandboxes (roBinds) must be absolute.');
  const startTimeoutMs = opts.startTimeoutMs ?? 20_000;
  const killWaitMs = opts.killWaitMs ?? 5_000;
  const fileOpTimeoutMs = opts.fileOpTimeoutMs ?? 120_000;
  const drainGraceMs = opts.drainGraceMs ?? 100;
  const toolOverrides = opts.tools ?? {};
  const network = opts.network ?? NETWORK_MODES[0];
  if (!isNetworkMode(network)) throw invalid(`The local provider's network must be ${NETWORK_MODES.map((m) => `'${m}'`).join(' or ')}.`);
  const limits = resolveLimitSettings(opts.limits);
  const residentIdleExitS = opts.residentIdleExitS ?? RESIDENT_IDLE_EXIT_DEFAULT_S;
  if (!Number.isSafeInteger(residentIdleExitS) || residentIdleExitS < 0 || residentIdleExitS > RESIDENT_IDLE_EXIT_MAX_S)
    throw invalid(
      `The resident agent's quiet period (residentIdleExitS) must be a whole number of seconds, 0-${RESIDENT_IDLE_EXIT_MAX_S}.`,
    );
  const shell = existsSync('/bin/bash') ? '/bin/bash' : '/bin/sh';
  const fds = inheritableFds();
  // Kept open for the life of the process: a closed number could be reused by another file.
  const cover = fds.length > 0 ? { fds, devNullFd: openSync('/dev/null', 'r+') } : undefined;
  return {
    stateDir,
    sandboxes,
    templatesDir: templates,
    maxSnapshotStorageBytes: maxSnapshotStorageMb * 1024 * 1024,
    keeperScript,
    nodePath,
    defaultTimeoutS,
    identity,
    isRoot,
    roBinds,
    uidPerSandbox,
    startTimeoutMs,
    killWaitMs,
    fileOpTimeoutMs,
    drainGraceMs,
    toolOverrides,
    network,
    limits,
    onEgressFailure: opts.onEgressFailure,
    residentAgent: opts.residentAgent ?? true,
    residentIdleExitS,
    shell,
    nodeBinDirs: nodeBinDirsOf(nodePath),
    cover,
  };
}
