// Who may use how many of a sandbox's processes. The count RLIMIT_NPROC checks is per user per
// user namespace, so every process and thread of the sandbox counts against one number, whoever
// started it. A runaway must not take the last ones: run_command must still run to clean up,
// and get_task/cancel_task start node (which hangs, rather than fails, when it cannot create its
// threads). So each kind of entry stops at its own limit below the sandbox's: tasks first, then
// commands, and the server's own short helpers may use all of it. What commands leave running
// (`cmd &`) stays at the commands' limit; a command that starts once the sandbox is there gets a
// small reserve above it, to clean up with kill or pkill; and stop_processes ends what is left
// from the host, needing no process in the sandbox at all.
import type { ExecRole } from '../../provider.js';

/** How far below the sandbox's process limit each kind of entry stops. */
const RESERVED_BELOW: Readonly<Record<ExecRole, number>> = { task: 96, command: 64, service: 0 };

/** How far below the limit a run_command or run_code stops when it starts with the sandbox at the commands' limit. */
const CLEANUP_RESERVED_BELOW = 32;

/**
 * Free slots an entry needs to start at all: below them it is refused at once (with a clear
 * error) instead of hanging. A task start runs node twice (the agent and the supervisor).
 */
const NEEDED_TO_START: Readonly<Record<ExecRole, number>> = { task: 24, command: 2, service: 12 };

/** Slack of the cgroup's pids.max above the sandbox's limit: the outer bwrap and the server's entry helpers. */
const PIDS_SLACK = 16;

/** RLIMIT_NPROC (soft and hard) of the processes an entry of `role` starts. */
export function processLimitFor(processes: number, role: ExecRole): number {
  return processes - RESERVED_BELOW[role];
}

/** RLIMIT_NPROC of a run_command or run_code that starts with the sandbox at the commands' limit: the reserve for cleaning up. */
export function cleanupLimitFor(processes: number): number {
  return processes - CLEANUP_RESERVED_BELOW;
}

/** A run_command or run_code that finds this many processes and threads gets the cleanup reserve (cleanupLimitFor). */
export function cleanupFrom(processes: number): number {
  return processLimitFor(processes, 'command') - NEEDED_TO_START.command;
}

/** An entry of `role` is refused when the sandbox already has this many processes and threads. */
export function refuseStartAt(processes: number, role: ExecRole): number {
  const limit = role === 'command' ? cleanupLimitFor(processes) : processLimitFor(processes, role);
  return limit - NEEDED_TO_START[role];
}

/** pids.max of the sandbox's cgroup: the hard bound behind the rlimits. */
export function pidsMaxFor(processes: number): number {
  return processes + PIDS_SLACK;
}
