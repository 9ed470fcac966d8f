// Bounds on the sandbox's System V IPC, set by its keeper in the sandbox's own IPC namespace
// (bwrap --unshare-ipc) before the sandbox is ready. A new IPC namespace starts with the kernel's
// defaults: shared memory all but unbounded and kept after its last process exits, outside the
// disk budget, and pages the OOM killer cannot free; about 500 MB of message queues. The IPC
// sysctls of a namespace are writable only by the uid that is root in the namespace's owner:
// a base sandbox's user namespace maps only the sandbox's own uid, so that is the host's root, and
// only a keeper running as root can set them (measured on kernel 6.18; docs/local-provider.md); a
// template sandbox's root inside is its namespace's root, whose host uid writes them.
// POSIX message queues need nothing here: RLIMIT_MSGQUEUE bounds their bytes per uid.
import { execFile } from 'node:child_process';

const MIB = 1024 * 1024;

// Segments (shmmni) and message queues (msgmni, 16 KiB each by default) one sandbox may have.
const SHM_SEGMENTS_MAX = 1024;
const MSG_QUEUES_MAX = 32;
// kernel.sem: semaphores per set, in all (about 64 bytes each), per semop call; sets.
const SEMAPHORES = '32000 32000 500 128';

/** How long the keeper waits for the sysctls to be written. */
const WRITE_TIMEOUT_MS = 5_000;

/**
 * The shell text that sets the bounds, run inside the sandbox's IPC namespace with the host's
 * /proc (whose /proc/sys/kernel shows the IPC namespace of the reader): shared memory of at most
 * `shmBytes` in all and per segment, a segment destroyed when its last attached process detaches
 * or exits, one never attached when its creator exits (shm_rmid_forced). Pure.
 */
export function ipcBoundsScript(shmBytes: number): string {
  const bytes = Math.max(Math.floor(shmBytes), 1);
  // shmall counts pages; a page size getconf cannot tell is taken as the common 4 KiB.
  return (
    `cd /proc/sys/kernel && p=$(getconf PAGESIZE 2>/dev/null) || p=4096; ` +
    `echo ${bytes} > shmmax && echo $(( (${bytes} + p - 1) / p )) > shmall && echo ${SHM_SEGMENTS_MAX} > shmmni && ` +
    `echo ${MSG_QUEUES_MAX} > msgmni && echo '${SEMAPHORES}' > sem && echo 1 > shm_rmid_forced`
  );
}

/**
 * Sets the bounds in the IPC namespace of `pid1` (a pid the caller verified), entering it with
 * `nsenter`; resolves with the bound in MiB, or null where it cannot be set (the keeper is not
 * root, or the write failed). Never rejects. A template sandbox (`namespaceRoot`: the host uid
 * that is root of its user namespace) is entered as that uid, through its user namespace: the
 * sysctls are that uid's to write, not the host root's (ipc_permissions; measured), and a server
 * that is not root can bound its template sandboxes too.
 */
export function boundSandboxIpc(
  tools: { nsenter: string; sh: string },
  pid1: number,
  shmBytes: number,
  namespaceRoot?: { uid: number; gid: number },
): Promise<number | null> {
  const isRoot = process.geteuid?.() === 0;
  if (!isRoot && namespaceRoot === undefined) return Promise.resolve(null);
  const enter = namespaceRoot ? ['-U', '-i', '--preserve-credentials'] : ['-i'];
  const args = ['-t', String(pid1), ...enter, '--', tools.sh, '-c', ipcBoundsScript(shmBytes)];
  const as = namespaceRoot && isRoot ? namespaceRoot : {};
  return new Promise((resolve) => {
    execFile(tools.nsenter, args, { timeout: WRITE_TIMEOUT_MS, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' }, ...as }, (err) =>
      resolve(err ? null : shmBytes / MIB),
    );
  });
}
