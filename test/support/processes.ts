// What is still running on this machine, read from /proc: whether a process lives, its group,
// finding a task's supervisor from the host, and proving that nothing of a destroyed sandbox is
// left.
import { closeSync, openSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { parseProcStat } from '../../shared/proc-stat.js';

// Set in a task's flags from the moment it starts exiting (the product's readStartTime reads it too).
const PF_EXITING = 0x4;

/**
 * True while `pid` is a live process: a zombie (dead, waiting for a parent that may never reap it)
 * is not, nor one already exiting (it runs none of its own code again; the kernel is tearing it down).
 */
export function isRunning(pid: number): boolean {
  try {
    const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
    return stat !== null && !['Z', 'X', 'x'].includes(stat.state) && (stat.flags & PF_EXITING) === 0;
  } catch {
    return false;
  }
}

/** The process group of a pid, or null when it is gone. */
export function pgidOf(pid: number): number | null {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.pgid ?? null;
  } catch {
    return null;
  }
}

/** The parent of a pid, or null when it is gone. */
export function ppidOf(pid: number): number | null {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.ppid ?? null;
  } catch {
    return null;
  }
}

/** A live process's start time (clock ticks since boot; with the pid it names the process); throws when it is gone. */
export function startTimeOf(pid: number): number {
  const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  if (!stat) throw new Error(`/proc/${pid}/stat is not shaped like a stat file`);
  return stat.startTime;
}

/** Pids of every process /proc lists now. */
export function allPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/** A process's argv, or [] when it is gone or unreadable. */
export function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/** The pid namespace a process is in (e.g. `pid:[4026532301]`), or undefined when gone. */
export function pidNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** A namespace held open by this process: its name stays its own until `release`. */
export interface HeldNamespace {
  /** As /proc shows it, e.g. `net:[4026532301]`. */
  name: string;
  release(): void;
}

/**
 * Holds the `kind` namespace `pid` is in (an open descriptor of it), so that its number names it
 * alone until released. The kernel gives a freed namespace number to the next namespace made on
 * the machine (test/local/namespace-reuse.test.ts): a look for processes still in a dead
 * sandbox's namespace, by number, could otherwise find the processes of a sandbox that another
 * test file, in the other worker, has just created. Throws when `pid` is gone.
 */
export function holdNamespace(pid: number, kind: 'net' | 'pid'): HeldNamespace {
  const fd = openSync(`/proc/${pid}/ns/${kind}`, 'r');
  let isHeld = true;
  return {
    // Read through the descriptor: the namespace held, whatever `pid` has become since.
    name: readlinkSync(`/proc/self/fd/${fd}`),
    release: () => {
      if (isHeld) closeSync(fd);
      isHeld = false;
    },
  };
}

/** Running processes (zombies excluded) in the given pid namespace. */
export function runningIn(namespace: string): number[] {
  return allPids().filter((pid) => pidNamespace(pid) === namespace && isRunning(pid));
}

/** Running processes whose argv satisfies `matches`. */
export function runningWith(matches: (argv: string[]) => boolean): number[] {
  return allPids().filter((pid) => matches(cmdline(pid)) && isRunning(pid));
}

/**
 * Whether a signal sent to `pid` can reach a handler of its own: the process catches `signal`
 * and at least one of its threads leaves it unblocked (a process-directed signal blocked in
 * every thread stays pending for good; Node's `--disable-sigusr1` leaves SIGUSR1 so).
 */
export function canCatch(pid: number, signal: number): boolean {
  const bit = 1n << BigInt(signal - 1);
  const maskOf = (status: string, field: string): bigint => BigInt(`0x${new RegExp(`^${field}:\\s*([0-9a-f]+)$`, 'm').exec(status)![1]}`);
  const isCaught = (maskOf(readFileSync(`/proc/${pid}/status`, 'utf8'), 'SigCgt') & bit) !== 0n;
  const threads = readdirSync(`/proc/${pid}/task`).map((tid) => readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'));
  return isCaught && threads.some((status) => (maskOf(status, 'SigBlk') & bit) === 0n);
}
