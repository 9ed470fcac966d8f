// What the keeper runs to start its sandbox, from the spec: the bwrap argv of the sandbox's kind
// (a base view, or a template's writable root through its launch helper; either with a workspace,
// which the launch helper mounts too) and the command around it.
import { accessSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { definedFields } from '../../../util/defined-fields.js';
import { buildBwrapArgs, buildTemplateBwrapArgs, WORKSPACE_PATH } from '../launch/bwrap-args.js';
import {
  buildLaunchCommand,
  buildTemplateLaunchCommand,
  type Command,
  type HelperMode,
  type TemplateLaunch,
} from '../launch/command-lines.js';
import { groupFile, passwdFile } from '../launch/passwd.js';
import { helpersDir, isHelperArch, readHelper } from '../launch/perl-helpers.js';
import { AGENT_STATE_MOUNT } from '../limits/disk-shares.js';
import { hostSystemDirs } from '../rootfs/base-view.js';
import { WORKSPACE_MERGED_DIR, WRITABLE_ROOT_DIR } from '../rootfs/writable-layer.js';
import { specNetwork, type SandboxSpec } from '../sandbox/spec.js';

// The descriptors bwrap gets: 3 reports pid 1's pid, 4 carries pid 1's `ready`, 5 and 6
// /etc/passwd and /etc/group (base). A template's launch helper puts the root on 7 and the user
// namespace on 8.
const STATUS_FD = 3;
const READY_FD = 4;
const PASSWD_FD = 5;
const GROUP_FD = 6;
const ROOT_FD = 7;
const USERNS_FD = 8;

/** The keeper's launch of one sandbox: the command and the passwd and group a base sandbox reads on 5 and 6. */
export interface SandboxLaunch {
  command: Command;
  passwd: string;
  group: string;
}

/** Why a launch could not even be built: a host path it binds is gone, or the build or the spec lacks something. */
export class LaunchPrepareError extends Error {
  constructor(readonly code: 'ro_bind_missing' | 'keeper_failed') {
    super(code);
    this.name = 'LaunchPrepareError';
  }
}

/**
 * True when the sandbox's bwrap can reach `path`: it exists and, when bwrap runs as the sandbox's
 * own uid (a root server), every directory on the way may be searched by others.
 */
function isReachable(path: string, dropsPrivileges: boolean): boolean {
  try {
    accessSync(path);
    if (!dropsPrivileges) return true;
    for (let dir = dirname(path); ; dir = dirname(dir)) {
      // X_OK as root ignores the mode bits for directories: read them.
      if ((statSync(dir).mode & 0o001) === 0) return false;
      if (dir === '/') return true;
    }
  } catch {
    return false;
  }
}

/**
 * The launch of the sandbox `spec` in state directory `dir`, its writable mounts sized by
 * `mountSizes` (bytes by path, writableMountSizes of its kind; none: unsized). Throws LaunchPrepareError.
 */
export function prepareLaunch(spec: SandboxSpec, dir: string, mountSizes?: Readonly<Record<string, number>>): SandboxLaunch {
  if (!spec.roBindPaths.every((p) => isReachable(p, spec.identity.dropPrivileges))) throw new LaunchPrepareError('ro_bind_missing');
  // The helper's tmpfs, where bwrap finds it: a root server's bwrap, as the sandbox's uid, reaches the mount point only.
  const rwDir = join(dir, WRITABLE_ROOT_DIR);
  const mountPoint = spec.root ? spec.root.mountPoint : spec.workspace?.mountPoint;
  const tmpfs = mountPoint ?? rwDir;
  const common = {
    statusFd: STATUS_FD,
    readyFd: READY_FD,
    roBindPaths: spec.roBindPaths,
    hidePaths: spec.hidePaths,
    network: specNetwork(spec),
    ...definedFields({
      runtimeDir: spec.runtimeDir,
      workspace: spec.workspace
        ? { merged: join(tmpfs, WORKSPACE_MERGED_DIR), lower: `${tmpfs}/ws/lower`, upper: `${tmpfs}/ws/upper` }
        : undefined,
    }),
  };
  if (!spec.root) {
    const args = buildBwrapArgs({
      ...common,
      passwdFd: PASSWD_FD,
      groupFd: GROUP_FD,
      shell: spec.shell,
      systemDirs: hostSystemDirs(),
      ...definedFields({ etcDir: spec.baseEtcDir, mountSizes }),
    });
    const files = { passwd: passwdFile(spec.identity, spec.shell), group: groupFile(spec.identity) };
    if (!spec.workspace) return { command: buildLaunchCommand(args, spec.identity, spec.tools), ...files };
    // A workspace needs the helper's mounts: it drops to the sandbox's uid itself (a root server).
    const command = buildTemplateLaunchCommand(
      args,
      helperLaunch(spec, rwDir, mountSizes?.[WORKSPACE_PATH], spec.identity.dropPrivileges ? 'drop' : 'keep', []),
      spec.identity,
      spec.tools,
    );
    return { command, ...files };
  }
  const isIdRange = spec.root.mode === 'idrange';
  const args = buildTemplateBwrapArgs({
    ...common,
    rootFd: ROOT_FD,
    ...definedFields({
      usernsFd: isIdRange ? USERNS_FD : undefined,
      shmBytes: mountSizes?.['/dev/shm'],
      agentStateBytes: mountSizes?.[AGENT_STATE_MOUNT],
    }),
  });
  const command = buildTemplateLaunchCommand(
    args,
    helperLaunch(spec, rwDir, mountSizes?.['/'], spec.root.mode, spec.root.layers),
    spec.identity,
    spec.tools,
  );
  return { command, passwd: '', group: '' };
}

/** The launch helper's part of a launch; throws LaunchPrepareError where it cannot run (or its tmpfs would be unsized). */
function helperLaunch(
  spec: SandboxSpec,
  rwDir: string,
  bytes: number | undefined,
  mode: HelperMode,
  layers: readonly string[],
): TemplateLaunch {
  // An unsized tmpfs could take half of the machine's memory.
  if (!isHelperArch(process.arch) || bytes === undefined) throw new LaunchPrepareError('keeper_failed');
  let text: string;
  try {
    text = readKeeperHelper('mount-root');
    mkdirSync(rwDir, { mode: 0o700 });
  } catch {
    throw new LaunchPrepareError('keeper_failed');
  }
  const mountPoint = spec.root ? spec.root.mountPoint : spec.workspace?.mountPoint;
  const ws = spec.workspace;
  // An image's user works in its workspace: its files are shown as that user's (a root server's block maps it).
  const inside = mode === 'idrange' && spec.user ? { inside: { uid: spec.user.uid, gid: spec.user.gid } } : {};
  return {
    helper: { text, arch: process.arch },
    rwDir,
    rootBytes: bytes,
    mode,
    layers,
    ...definedFields({ mountPoint, workspace: ws ? { dir: ws.hostPath, uid: ws.uid, gid: ws.gid, ...inside } : undefined }),
  };
}

/** A helper of the build this keeper runs from (dist/helpers beside dist/keeper.cjs). */
export function readKeeperHelper(name: 'mount-root' | 'userns-off'): string {
  return readHelper(helpersDir(process.argv[1] ?? ''), name);
}
