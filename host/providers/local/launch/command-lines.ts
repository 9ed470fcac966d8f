// The full command lines that launch a sandbox (bwrap; for a template, through its launch helper)
// and enter one (nsenter; for a template, its entry helper): the cgroup join and, as root, the
// privilege drop wrapped around them. Pure and unit-tested, like bwrap-args.ts.
import type { NetworkMode } from '../../provider.js';
import { perlCommand, type SYSCALL_NUMBERS } from './perl-helpers.js';

/** Who runs the sandbox: when the host runs as root, an unprivileged uid of its own with no capabilities. */
export interface Identity {
  uid: number;
  gid: number;
  /** True when the host runs as root and must drop to uid/gid via setpriv. */
  dropPrivileges: boolean;
}

/** Absolute paths of the system tools sandboxes are built and entered with (found by preflight). */
export interface ToolPaths {
  bwrap: string;
  nsenter: string;
  setpriv: string;
  sh: string;
  /** Runs the helpers (launch/perl-helpers.ts); absent in specs of servers before templates. */
  perl?: string;
}

/** A perl helper's text and the architecture whose system call numbers it is given (launch/perl-helpers.ts). */
export interface HelperScript {
  text: string;
  arch: keyof typeof SYSCALL_NUMBERS;
}

/**
 * The capabilities a template sandbox's commands keep (a bounding-set mask), by how its root is
 * made (sandbox/spec.ts TemplateRoot). `idrange`: what container engines give (Docker's default
 * set less mknod and net_raw) — chown, dac_override, fowner, fsetid, kill, setgid, setuid, setpcap,
 * net_bind_service, sys_chroot, audit_write, setfcap — for apt and dpkg; each acts only on the ids
 * the sandbox's namespace maps, i.e. its own files and processes. None of sys_admin (mount),
 * sys_resource, net_admin, sys_ptrace. `userns`: none (one id, nothing to switch between).
 */
export const TEMPLATE_COMMAND_CAPS = { idrange: 'a00405fb', userns: '0' } as const;

/** A program and its arguments, ready for spawn (with uid/gid: spawn drops to them, groups cleared). */
export interface Command {
  file: string;
  args: string[];
  uid?: number;
  gid?: number;
}

// Moves the shell into each cgroup (by its cgroup.procs file) before exec'ing the rest, so the
// command and everything it forks are accounted from their first instruction.
const CGROUP_JOIN_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"';

function setprivArgs(id: Identity): string[] {
  // prettier-ignore
  return [
    `--reuid=${id.uid}`, `--regid=${id.gid}`, '--clear-groups',
    '--inh-caps=-all', '--bounding-set=-all', '--no-new-privs',
  ];
}

/** Prefixes `inner` with the cgroup join and, as root, the privilege drop. */
function wrap(inner: Command, id: Identity, tools: ToolPaths, cgroupProcsFiles: readonly string[]): Command {
  let cmd = inner;
  if (id.dropPrivileges) cmd = { file: tools.setpriv, args: [...setprivArgs(id), cmd.file, ...cmd.args] };
  if (cgroupProcsFiles.length > 0) {
    cmd = { file: tools.sh, args: ['-c', CGROUP_JOIN_SCRIPT, 'sh', ...cgroupProcsFiles, '--', cmd.file, ...cmd.args] };
  }
  return cmd;
}

/**
 * `cmd` with a privilege drop that spawn would have done (its uid/gid) done by setpriv instead, for
 * spawners that only call setgid/setuid and so would keep root's supplementary groups (node-pty's
 * fork). A command without uid/gid is returned unchanged.
 */
export function dropWithSetpriv(cmd: Command, tools: ToolPaths): Command {
  if (cmd.uid === undefined || cmd.gid === undefined) return cmd;
  return { file: tools.setpriv, args: [...setprivArgs({ uid: cmd.uid, gid: cmd.gid, dropPrivileges: true }), cmd.file, ...cmd.args] };
}

/** The full command the keeper spawns to start a base sandbox (outside its cgroups: see spawnBwrap). */
export function buildLaunchCommand(bwrapArgs: string[], id: Identity, tools: ToolPaths): Command {
  return wrap({ file: tools.bwrap, args: bwrapArgs }, id, tools, []);
}

/**
 * How the launch helper makes a sandbox's mounts (see helpers/mount-root.pl): a template's
 * writable root (`idrange`, `userns`), and a workspace, which a base sandbox gets the helper for
 * alone (`drop`: a root server, which drops to the sandbox's uid itself; `keep`: a server that is not root).
 */
export type HelperMode = 'idrange' | 'userns' | 'drop' | 'keep';

/** Where and how a sandbox's mounts are made (see helpers/mount-root.pl). */
export interface TemplateLaunch {
  helper: HelperScript;
  /** The empty directory that gets the sandbox's tmpfs. */
  rwDir: string;
  /** Where bwrap finds the tmpfs (TemplateRoot.mountPoint, SpecWorkspace.mountPoint); absent: in rwDir. */
  mountPoint?: string;
  /** The tmpfs's size: the writable root's share of the disk budget, or the workspace's. */
  rootBytes: number;
  mode: HelperMode;
  /** The template's layer directories, top first; none for `drop` and `keep`. */
  layers: readonly string[];
  /**
   * The workspace: the person's directory and its owner (shown as the sandbox user's as root);
   * `inside`: idrange only, the ids inside it is shown as instead of root's (an image's user).
   */
  workspace?: { dir: string; uid: number; gid: number; inside?: { uid: number; gid: number } };
}

/**
 * The full command the keeper spawns to start a sandbox through its launch helper, run as the
 * keeper's own uid (root mounts, then drops to the sandbox's uid itself), which execs bwrap.
 */
export function buildTemplateLaunchCommand(bwrapArgs: string[], launch: TemplateLaunch, id: Identity, tools: ToolPaths): Command {
  // drop: the sandbox's own uid and group (a configured group may differ); idrange: its block's first id.
  const uid = launch.mode === 'drop' ? `${id.uid}:${id.gid}` : String(launch.mode === 'idrange' ? id.uid : 0);
  const ws = launch.workspace ? ['--workspace', launch.workspace.dir, String(launch.workspace.uid), String(launch.workspace.gid)] : [];
  const inside = launch.workspace?.inside;
  if (inside) ws.push('--workspace-as', `${inside.uid}:${inside.gid}`);
  // prettier-ignore
  return perlCommand(tools.perl ?? 'perl', launch.helper.text, launch.helper.arch, [
    launch.rwDir, launch.mountPoint ?? '-', String(Math.floor(launch.rootBytes)), launch.mode, uid, ...launch.layers, ...ws,
    '--', tools.bwrap, ...bwrapArgs,
  ]);
}

/**
 * How commands enter a template sandbox: helpers/enter.pl (uid 0 inside must not exec with the
 * capabilities nsenter would give it), keeping `keepCaps` (TEMPLATE_COMMAND_CAPS).
 */
export interface TemplateEntry {
  helper: HelperScript;
  keepCaps: string;
  /** The ids (inside the sandbox) the command runs as: the image's user; absent: root inside. */
  runAs?: { uid: number; gid: number };
}

/**
 * The full command that runs `argv` inside a sandbox whose pid 1 has host pid `pid1`, in its
 * network namespace too unless the sandbox shares the host's (`network` must be the mode it was
 * created with: entering the host's namespace from the sandbox's user namespace is refused). As root,
 * the command carries uid/gid for spawn to drop to (libuv clears supplementary groups; setuid
 * clears every capability) — one exec fewer than setpriv, which is most of exec's overhead.
 * With cgroups, the join runs before the drop (as the keeper's does), then setpriv drops: cgroup
 * v2 lets only a writer of the common ancestor's cgroup.procs move a process, i.e. root.
 */
export function buildEnterCommand(
  pid1: number,
  argv: readonly string[],
  id: Identity,
  tools: ToolPaths,
  cgroupProcsFiles: readonly string[] = [],
  network: NetworkMode = 'isolated',
  template?: TemplateEntry,
): Command {
  const namespaces = ['-U', '-p', '-m', '-i', '-u', ...(network === 'host' ? [] : ['-n'])];
  const cmd: Command = template
    ? perlCommand(tools.perl ?? 'perl', template.helper.text, template.helper.arch, [
        String(pid1),
        network === 'host' ? '0' : '1',
        template.keepCaps,
        template.runAs ? `${template.runAs.uid}:${template.runAs.gid}` : '-',
        '--',
        ...argv,
      ])
    : { file: tools.nsenter, args: ['-t', String(pid1), '--preserve-credentials', ...namespaces, '-r', '-w', '--', ...argv] };
  if (cgroupProcsFiles.length > 0) return wrap(cmd, id, tools, cgroupProcsFiles);
  return id.dropPrivileges ? { ...cmd, uid: id.uid, gid: id.gid } : cmd;
}
