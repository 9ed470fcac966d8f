// The sandbox's processes and threads, counted the way RLIMIT_NPROC counts them (every thread of
// the sandbox's user): before the resident starts a command with `bounds`, it refuses when the
// sandbox already has `refuse_at` of them, as the host's entry prelude does for commands that
// enter with nsenter (a command that cannot get its processes would hang rather than fail). The
// machine's own thread count, an upper bound read at once, spares the walk of /proc when far below.
import { readdirSync, readFileSync } from 'node:fs';
import { listPids } from '../shared/proc-pids.js';
import type { Bounds } from '../shared/protocol.js';
import { AgentFailure } from './errors.js';

/** Threads of every process this agent sees in /proc (the sandbox's own pid namespace). */
export function countThreads(): number {
  let n = 0;
  for (const pid of listPids() ?? []) {
    try {
      n += readdirSync(`/proc/${pid}/task`).length;
    } catch {
      // exited meanwhile
    }
  }
  return n;
}

/**
 * Every thread of the machine, all pid namespaces together (the total of /proc/loadavg's
 * `running/total`: the kernel's nr_threads, which no namespace narrows): at least the sandbox's
 * own count, in one small read. Null when it cannot be read.
 */
function machineThreads(): number | null {
  try {
    const total = Number(/^\S+ \S+ \S+ \d+\/(\d+) /.exec(readFileSync('/proc/loadavg', 'latin1'))?.[1]);
    return Number.isSafeInteger(total) && total > 0 ? total : null;
  } catch {
    return null;
  }
}

/**
 * Throws `process_limit` when the sandbox has no room for a command bounded by `bounds`; else the
 * bounds it runs with: on the cleanup reserve's process limit when the sandbox is at the share
 * where that starts (as the host's entry prelude decides for an nsenter entry).
 */
export function refuseWithoutRoom<B extends Bounds | undefined>(bounds: B): B {
  if (!bounds) return bounds;
  // The machine's own count bounds the sandbox's from above: below both points, no need to walk
  // /proc (one directory read per process, per command: milliseconds in a busy sandbox).
  const machine = machineThreads();
  if (machine !== null && machine + 1 < Math.min(bounds.refuse_at, bounds.cleanup?.from ?? Infinity)) return bounds;
  // Counted as an entering shell counts: itself (the command's first process) included.
  const n = countThreads() + 1;
  if (n >= bounds.refuse_at) {
    throw new AgentFailure('process_limit', 'the sandbox is at its process limit: the command was not started');
  }
  return bounds.cleanup && n >= bounds.cleanup.from ? { ...bounds, processes: bounds.cleanup.processes } : bounds;
}
