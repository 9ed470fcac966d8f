// Process identity from /proc. A pid alone is not an identity (pids are reused), so every pid
// the local provider records is paired with its start time and checked again before use.
import { closeSync, openSync, readFileSync, readlinkSync, readSync } from 'node:fs';
import { listPids } from '../../../../shared/proc-pids.js';
import { parseProcStat, type ProcStat } from '../../../../shared/proc-stat.js';

/** A process as recorded in state: pid plus /proc start time (clock ticks since boot). */
export interface ProcIdentity {
  pid: number;
  startTime: string;
}

// Set in a task's flags from the moment it starts exiting: a sandbox's pid 1 keeps this state
// (not yet a zombie) while the kernel kills the rest of its pid namespace.
const PF_EXITING = 0x4;

// A kernel file such as /proc/<pid>/stat (one line of a few hundred bytes) or a cgroup's
// memory.oom_control: one read into this buffer gets all of it. readFileSync, to which such files
// report a size of 0, adds an fstat, a second read for the end of file and a copy: every look at a
// sandbox reads two stat files (about 9% of the server's thread per run_command under 16 HTTP
// sessions, in a perf profile), and every command an OOM counter.
const smallFileBuffer = Buffer.alloc(4096);

/** The text (latin1) of a small kernel file, or null when it cannot be read. */
export function readSmallKernelFile(path: string): string | null {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  try {
    const n = readSync(fd, smallFileBuffer, 0, smallFileBuffer.length, null);
    // Text that filled the buffer (never seen for these files) is read whole the ordinary way.
    return n < smallFileBuffer.length ? smallFileBuffer.toString('latin1', 0, n) : readFileSync(path, 'latin1');
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

/** A process's /proc stat, parsed, or null when it cannot be read. */
function procStat(pid: number): ProcStat | null {
  const text = readSmallKernelFile(`/proc/${pid}/stat`);
  return text === null ? null : parseProcStat(text);
}

/** The start time of a live process, or null when it is gone, exiting or a zombie. */
export function readStartTime(pid: number): string | null {
  if (!Number.isInteger(pid) || pid <= 0) return null;
  const stat = procStat(pid);
  if (!stat || stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') return null;
  if ((stat.flags & PF_EXITING) !== 0) return null;
  // Recorded as text in keeper records, as the kernel writes it.
  return String(stat.startTime);
}

/** True when the recorded process still runs (same pid and same start time). */
export function isAlive(proc: ProcIdentity | undefined): boolean {
  return proc !== undefined && readStartTime(proc.pid) === proc.startTime;
}

/** The identity of a live process, or null. */
export function identify(pid: number): ProcIdentity | null {
  const startTime = readStartTime(pid);
  return startTime === null ? null : { pid, startTime };
}

/** Sends a signal only if the recorded process is still the same one; false when it is gone. */
export function signalIfAlive(proc: ProcIdentity | undefined, signal: NodeJS.Signals): boolean {
  if (!proc || !isAlive(proc)) return false;
  try {
    process.kill(proc.pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Clock ticks since boot now (/proc/uptime in USER_HZ, 100 on Linux: the unit of /proc start times), or null. */
export function ticksSinceBoot(): number | null {
  const seconds = Number(readSmallKernelFile('/proc/uptime')?.split(' ')[0]);
  return Number.isFinite(seconds) && seconds > 0 ? Math.floor(seconds * 100) : null;
}

/**
 * True when `pid` is known to have started after `ticks` (clock ticks since boot). Namespace
 * numbers (`net:[…]`, `pid:[…]`) come from one pool and are given again as soon as one is freed
 * (measured: `unshare -n` twice in a row may get the same one), so a sweep that goes on looking for
 * a dead sandbox's namespace by its number may find a sandbox created meanwhile that got it: what
 * started after the sweep's sandbox began ending cannot be one of its own. Unknown: false.
 */
function startedAfter(pid: number, ticks: number | null | undefined): boolean {
  if (ticks === null || ticks === undefined) return false;
  const stat = procStat(pid);
  return stat !== null && stat.startTime > ticks;
}

/** The pid namespace a process lives in (e.g. `pid:[4026532181]`), or null. */
export function pidNamespace(pid: number): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return null;
  }
}

/**
 * SIGKILLs (and continues) every process outside a pid namespace whose children are born in it:
 * nsenter's host-side half. A stopped one would never reap its child, and the namespace's dying
 * pid 1 waits for that — so the sandbox could not finish dying. With `startedBy`, spares what
 * started after it (see startedAfter). Returns how many it signalled.
 */
export function killNamespaceEnterers(ns: string, exceptPids: readonly number[] = [], startedBy?: number | null): number {
  let count = 0;
  for (const pid of listPids() ?? []) {
    if (pid <= 1 || exceptPids.includes(pid)) continue;
    let forChildren: string;
    try {
      forChildren = readlinkSync(`/proc/${pid}/ns/pid_for_children`);
    } catch {
      continue;
    }
    if (forChildren !== ns || pidNamespace(pid) === ns || startedAfter(pid, startedBy)) continue;
    for (const sig of ['SIGKILL', 'SIGCONT'] as const) {
      try {
        process.kill(pid, sig);
      } catch {
        // Gone already.
      }
    }
    count++;
  }
  return count;
}

/** The network namespace a process lives in (e.g. `net:[4026532185]`), or null (gone, or a zombie). */
export function netNamespace(pid: number | 'self'): string | null {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return null;
  }
}

/**
 * The pids of the live processes in network namespace `ns` (a zombie is in none), this one
 * excepted; with `startedBy` (clock ticks since boot), only those not known to have started after
 * it (see startedAfter: the number may have been given to another sandbox's namespace since).
 */
export function processesInNetNamespace(ns: string, startedBy?: number | null): number[] {
  return (listPids() ?? []).filter((pid) => pid !== process.pid && netNamespace(pid) === ns && !startedAfter(pid, startedBy));
}
