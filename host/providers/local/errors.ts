// Every local failure becomes one of the fixed categories here, with static text of ours:
// keeper start-up codes, missing tools and stray exceptions (whose messages carry host paths).
import { definedFields } from '../../util/defined-fields.js';
import { isProviderError, ProviderError } from '../provider-error.js';
import type { KeeperFailure } from './keeper/report.js';
import { CREATE_NEEDS_TASKS, FIRST_CALL_TASKS, isOutOfProcesses, shortOfProcesses } from './system/user-processes.js';

/** Static "what is wrong and how to fix it" texts for the environment checks. */
export const LOCAL_DETAILS = {
  notLinux: 'The local provider needs Linux (bubblewrap and namespaces); use the e2b provider elsewhere.',
  bwrapMissing: 'bubblewrap (bwrap) is not installed: install it (apt-get install bubblewrap, dnf install bubblewrap) and retry.',
  bwrapOverrideMissing:
    'SANDBOX_MCP_BWRAP does not name an executable file: point it at the bwrap binary, or unset it to use bubblewrap from PATH (install it: apt-get install bubblewrap, dnf install bubblewrap).',
  nsenterMissing: "util-linux's nsenter is not installed: install util-linux and retry.",
  setprivMissing: "util-linux's setpriv is not installed (needed to drop root in sandboxes): install util-linux and retry.",
  flockMissing:
    "util-linux's flock is not installed (creates take a lock shared by every server on the state directory): install util-linux and retry.",
  createLockBusy:
    'Another server sharing the state directory held its create lock for too long (is one stopped?): retry, or point SANDBOX_MCP_STATE_DIR elsewhere.',
  hostBundleMissing: 'The built keeper (dist/keeper.cjs) or its helpers (dist/helpers/) are missing: run `npm run build` and retry.',
  usernsRefused:
    'The kernel refuses unprivileged user namespaces, which bubblewrap needs: enable them (sysctl -w kernel.unprivileged_userns_clone=1 and user.max_user_namespaces=10000) and retry.',
  usernsApparmor:
    'AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+): allow them for bwrap (an AppArmor profile granting userns, or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0) and retry.',
  cgroupUnavailable:
    'cpu/memory limits need a cgroup the sandbox keeper can create (root with cgroup v1 cpu/memory controllers, or a delegated cgroup v2 subtree with cpu and memory enabled); create the sandbox without cpu/memory here.',
  networkFailed:
    "The sandbox's egress proxy could not be started in its network namespace; check that nsenter works on this machine (sandbox-mcp doctor) and retry.",
  bwrapFailed:
    'bubblewrap failed to start the sandbox: retry; if it fails again, check that bubblewrap works on this machine (bwrap --ro-bind / / true), and start the server with SANDBOX_MCP_DEBUG=1 to log how bwrap failed.',
  startOutOfResources:
    'This machine could not start the sandbox: it is out of processes or memory (bubblewrap could not fork or create its namespaces). Destroy sandboxes you no longer need (kill_sandbox) or end what runs in them (stop_processes, cancel_task), or end other programs on the machine, and retry.',
  startTimeout: 'The sandbox did not become ready in time; the machine may be overloaded. Retry.',
  sandboxGone: 'The sandbox does not exist (it may have expired or been killed).',
  endedDuringCommand: 'The sandbox ended while the command ran (it expired or was killed).',
  cwdMissing: 'The working directory does not exist in the sandbox (or is not a directory).',
  templateNotFound:
    "template: this server has no template of that name (create_sandbox's description lists the ones it has; 'base' is the host's system, read-only).",
  templateOwnersMismatch:
    'template: this template was made for a server running as another user (a root server needs templates made as root, any other server templates made as itself); make it again with `sandbox-mcp template` as the user this server runs as.',
  perlMissing:
    'perl is not installed: the local provider runs its small helpers with it (apt-get install perl-base, dnf install perl-interpreter) — install it and retry.',
  archUnsupported:
    "The local provider runs on x86_64 and aarch64 Linux only (its helpers make this kernel's system calls by number); use the e2b provider elsewhere.",
  rootMountFailed:
    "The template's writable root could not be mounted. Kernel overlayfs over the template's layers needs Linux 5.11 or later (5.19 as root, whose layers are mounted idmapped) and a template directory on a file system that supports that (ext4, xfs, btrfs; not NFS).",
  roBindMissing:
    'A host path this server shows read-only in sandboxes (--sandbox-ro-bind, SANDBOX_MCP_SANDBOX_RO_BIND) is gone: restore it, or restart the server without it.',
  usernsLimitFailed:
    "The sandbox was not started: its keeper could not forbid user namespaces inside it (with perl, in the sandbox's user namespace). Check that perl works (sandbox-mcp doctor) and retry.",
  idBlocksExhausted: 'Every block of host ids for template sandboxes on this machine is in use; kill a template sandbox and retry.',
  regionOnlyLocal: "The local provider has only the region 'local'.",
  hostDiskFull:
    "The disk holding the server's state directory is full (or its quota is used up): free space there, or point SANDBOX_MCP_STATE_DIR at another disk, and retry.",
  hostOutOfFiles:
    'The server has run out of open files: raise its open-file limit (ulimit -n, or LimitNOFILE= for a systemd service), or end sessions and destroy sandboxes it no longer needs (kill_sandbox), and retry.',
  hostOutOfProcesses:
    'This machine could not start a process for the server (out of processes or memory): destroy sandboxes you no longer need (kill_sandbox) or end what runs in them (stop_processes, cancel_task), or end other programs on the machine, and retry.',
} as const;

/**
 * insufficient_resources for the server's user at its process limit (RLIMIT_NPROC), which every
 * process and thread of that uid counts against — the server's, its keepers', and, for a server
 * that is not root, everything in its sandboxes: names the limit, the count and the ways out.
 */
export function userProcessLimitError(
  u: { uid: number; limit: number; used: number },
  failed = `starting a sandbox needs about ${CREATE_NEEDS_TASKS} more`,
): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'user_process_limit',
    detail:
      `The server's user (uid ${u.uid}) is at its process limit: ${u.used} of ${u.limit} processes and threads (RLIMIT_NPROC, counted over all of that user's processes, its sandboxes' included), and ${failed}. ` +
      'Destroy sandboxes you no longer need (kill_sandbox) or end what runs in them (stop_processes, cancel_task), end other processes of that user, or raise its limit (ulimit -u, LimitNPROC= for a systemd service), and retry.',
  });
}

/**
 * The server's user's process limit, named, when that user has fewer than FIRST_CALL_TASKS left
 * below it now (`failed`: what could not be done); null when it has room, or no limit binds.
 */
export function userProcessLimitIfShort(failed: string): ProviderError | null {
  const short = shortOfProcesses(FIRST_CALL_TASKS);
  return short ? userProcessLimitError(short, failed) : null;
}

/** The error of a spawn that failed: out of processes or memory said as such, anything else `missing`. */
export function spawnFailureError(err: NodeJS.ErrnoException, missing: ProviderError): ProviderError {
  return isOutOfProcesses(err.code) ? hostResourcesError(err.code) : missing;
}

/** insufficient_resources for this machine (not a sandbox) lacking what the server needs, by errno code, naming the way out. */
export function hostResourcesError(code: string | undefined): ProviderError {
  const detail =
    code === 'ENOSPC' || code === 'EDQUOT'
      ? LOCAL_DETAILS.hostDiskFull
      : code === 'EMFILE' || code === 'ENFILE'
        ? LOCAL_DETAILS.hostOutOfFiles
        : LOCAL_DETAILS.hostOutOfProcesses;
  return new ProviderError('insufficient_resources', { detail, ...definedFields({ code }) });
}

/** The ProviderError for a keeper start-up failure. */
export function keeperFailureError(code: KeeperFailure): ProviderError {
  switch (code) {
    case 'userns_refused':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.usernsRefused });
    case 'userns_apparmor':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.usernsApparmor });
    case 'cgroup_unavailable':
      return new ProviderError('unsupported', { code, detail: LOCAL_DETAILS.cgroupUnavailable });
    case 'tool_missing':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.bwrapMissing });
    case 'start_timeout':
      return new ProviderError('timeout', { code, detail: LOCAL_DETAILS.startTimeout });
    case 'bwrap_failed':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.bwrapFailed });
    case 'start_out_of_resources':
      return new ProviderError('insufficient_resources', { code, detail: LOCAL_DETAILS.startOutOfResources });
    case 'network_failed':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.networkFailed });
    case 'root_mount_failed':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.rootMountFailed });
    case 'ro_bind_missing':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.roBindMissing });
    case 'userns_limit_failed':
      return new ProviderError('unavailable', { code, detail: LOCAL_DETAILS.usernsLimitFailed });
    case 'spec_invalid':
    case 'keeper_failed':
      return new ProviderError('internal', { code });
  }
}

/** Maps anything thrown inside the provider to a ProviderError; never keeps a foreign message. */
export function toProviderError(e: unknown): ProviderError {
  if (isProviderError(e)) return e;
  const code = (e as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return new ProviderError('permission_denied', { code, detail: 'The local provider may not access its state directory.' });
    case 'ENOSPC':
    case 'EDQUOT':
    case 'EMFILE':
    case 'ENFILE':
    case 'EAGAIN':
    case 'ENOMEM':
      return hostResourcesError(code);
    default:
      return new ProviderError('internal');
  }
}
