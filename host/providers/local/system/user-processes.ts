// The server's user's process limit (RLIMIT_NPROC) and how much of it is used. The kernel counts
// every process and thread of a real uid — the server, its keepers, and everything in the
// sandboxes of a server that is not root (they run as its uid, charged to it from their user
// namespaces) — against the limit of the process that forks. A create needs a dozen of them
// (a keeper's threads, bwrap, pid 1, the helpers): near the limit one of them fails to start, and
// which one decides how the failure looks (measured: a keeper that dies or hangs, a bwrap that
// cannot be spawned, a namespace that cannot be created, a helper that cannot fork). So a failed
// start is checked against this, and reported as the limit it is. Read after a failure, and
// before a create only where the whole machine's count could reach the limit (shortOfProcesses).
import { listPids } from '../../../../shared/proc-pids.js';
import { readSmallKernelFile } from './proc.js';

/** An errno saying a spawn, fork or clone found no process or memory to take (not a program missing). */
export function isOutOfProcesses(code: string | undefined): boolean {
  return code === 'EAGAIN' || code === 'ENOMEM';
}

/** The server's user's process limit and its processes and threads now. */
export interface UserProcesses {
  uid: number;
  /** The soft RLIMIT_NPROC of this process (inherited by its keepers). */
  limit: number;
  /** Processes and threads of this real uid, machine-wide as this /proc shows them. */
  used: number;
}

/** This process's soft RLIMIT_NPROC, or null when unlimited or unreadable. */
export function processLimit(limitsText: string | null = readSmallKernelFile('/proc/self/limits')): number | null {
  const m = /^Max processes\s+(\S+)/m.exec(limitsText ?? '');
  if (!m || m[1] === 'unlimited') return null;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

/**
 * The processes and threads a keeper needs before its first line of JavaScript runs: its own
 * process, node's delayed-task thread and its one platform worker (`--v8-pool-size=1`,
 * keeper/start.ts). Short of the delayed-task thread node aborts; short of a worker it waits for
 * that worker forever (node_platform.cc counts the workers it asked for, not those it started:
 * measured with 2 left, the keeper hung with 2 threads until the server's start timeout). Nothing
 * in the keeper runs by then to notice, so a create checks for this room before it starts one.
 */
export const KEEPER_START_TASKS = 3;

/**
 * The same for the keeper's netns helper (network/netns-sockets.ts), a node process with one
 * platform worker too (nsenter execs it: no process more). The keeper starts it while a sandbox
 * with an egress allow-list starts, for its proxy's socket, and later for each exposed port's
 * connections; short of these it hung until its request gave up (10 s), so the keeper checks for
 * them before it starts one, and a create with an allow-list checks for both.
 */
export const NETNS_HELPER_START_TASKS = 3;

/**
 * What a sandbox takes once it is ready, by its first call's answer: its resident (the entering
 * nsenter and node's 4 threads), that call's supervisor and shell, and the warm supervisor the
 * resident boots beside it (agent/warm-supervisor.ts; 6 threads on 2 cores, node's workers one
 * per core but one). A keeper that finds fewer left once its sandbox is otherwise ready fails the
 * start. Measured under `prlimit --nproc=96` by what was left at that point: 13, and the first
 * run_command worked (1 left after it); 11 to 5, it answered exit_code null with no output (with 9
 * and 7 after 20 s, as a task in state unknown); 3 and 2, each call waited 5 s for a resident
 * stuck in its shell's fork retries, then failed; 1, it met nsenter's "fork failed" as its
 * command's stderr, exit code 1. One more than the 13 for a thread more here or there.
 */
export const FIRST_CALL_TASKS = 14;

/** What a ready sandbox holds before its resident: its keeper's 4 threads, bwrap, pid 1 and pid 1's sleep (measured). */
const READY_SANDBOX_TASKS = 7;

/**
 * How many processes and threads a create needs left below the limit: a ready sandbox, an
 * allow-list's netns helper (idle for 30 s after the start), and its resident and first call (24).
 * A failed start with fewer left is the limit's doing (create.ts, asUserProcessLimit).
 */
export const CREATE_NEEDS_TASKS = READY_SANDBOX_TASKS + NETNS_HELPER_START_TASKS + FIRST_CALL_TASKS;

/**
 * The processes and threads of the whole machine (the total of /proc/loadavg's fourth field,
 * the kernel's nr_threads), or null when unreadable: a bound on any one uid's count, in one read.
 */
export function machineTasks(loadavgText: string | null = readSmallKernelFile('/proc/loadavg')): number | null {
  const m = /^\S+ \S+ \S+ \d+\/(\d+) /.exec(loadavgText ?? '');
  return m ? Number(m[1]) : null;
}

/** The processes and threads whose real uid is `uid`, from each process's status (Uid's first field, Threads). */
export function countTasksOf(uid: number): number {
  let n = 0;
  for (const pid of listPids() ?? []) {
    const status = readSmallKernelFile(`/proc/${pid}/status`);
    if (status === null) continue;
    const real = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    if (real === undefined || Number(real) !== uid) continue;
    n += Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? 1);
  }
  return n;
}

/** The server's uid and its soft limit, or null where no limit binds: root (the kernel exempts it) or an unlimited RLIMIT_NPROC. */
function bindingLimit(): { uid: number; limit: number } | null {
  const uid = process.getuid?.();
  if (uid === undefined || uid === 0) return null;
  const limit = processLimit();
  return limit === null ? null : { uid, limit };
}

/** The user's processes when fewer than CREATE_NEEDS_TASKS are left below its limit (a create cannot be sure to start); else null. */
export function nearProcessLimit(): UserProcesses | null {
  return shortOfProcesses(CREATE_NEEDS_TASKS);
}

/**
 * The user's processes when fewer than `needed` are left below its limit, else null (also where no
 * limit binds). Cheap where the limit is far: /proc is scanned only when the whole machine's count
 * (machineTasks) could reach it, which the uid's own count never exceeds.
 */
export function shortOfProcesses(needed: number): UserProcesses | null {
  const bound = bindingLimit();
  if (!bound) return null;
  const machine = machineTasks();
  if (machine !== null && bound.limit - machine >= needed) return null;
  const used = countTasksOf(bound.uid);
  return bound.limit - used < needed ? { ...bound, used } : null;
}
