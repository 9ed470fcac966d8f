// What the tools say when a sandbox meets one of its limits: static sentences of ours, built from
// numbers only (never from a command's output), for errors and for the notes results carry.
import { ProviderError } from '../../provider-error.js';
import type { ExecRole } from '../../provider.js';
import { AGENT_STATE_MOUNT, diskSharesSixteenths } from './disk-shares.js';
import { cleanupLimitFor, processLimitFor } from './process-tiers.js';

/** insufficient_resources for a create beyond the server's maximum of live sandboxes. */
export function tooManySandboxes(max: number): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'sandbox_limit',
    detail:
      `This server allows at most ${max} live local sandboxes (counted in its state directory, so other servers sharing it count too): ` +
      'destroy one you no longer need with kill_sandbox (list_sandboxes shows yours), or raise the limit with --max-sandboxes or SANDBOX_MCP_MAX_SANDBOXES.',
  });
}

/** insufficient_resources for a create whose memory limit would take the counted limits above the ceiling. */
export function memoryCeilingReached(ceilingMb: number, countedMb: number): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'memory_ceiling',
    detail:
      `The local sandboxes of this state directory may use at most ${ceilingMb} MB of memory together, and the memory limits of those running add up to ${countedMb} MB ` +
      '(no parent cgroup can hold them here, so their limits are counted): destroy a sandbox with kill_sandbox, create this one with less `memory`, ' +
      'or raise the ceiling with --max-total-memory or SANDBOX_MCP_MAX_TOTAL_MEMORY.',
  });
}

// The way out of a full process table, by who was refused. run_command and run_code keep a
// reserve until leftovers of commands fill it too; stop_processes needs no process in the sandbox.
const WAY_OUT: Readonly<Record<ExecRole, string>> = {
  task:
    'end what you no longer need: run_command with kill or pkill (commands keep a reserve for this), cancel_task for a task, ' +
    'or stop_processes, which ends every process that is not part of a task',
  command:
    'call stop_processes: it ends every process that is not part of a task (what commands left running in the background) and needs no room in the sandbox; ' +
    'cancel_task stops a task',
  service: 'call stop_processes: it ends every process that is not part of a task and needs no room in the sandbox',
};

const WHO: Readonly<Record<ExecRole, string>> = {
  task: 'a task',
  command: 'a command',
  service: "the server's task agent or file operation",
};

/** insufficient_resources for a command refused because the sandbox has no process left for it. */
export function processLimitReached(processes: number, role: ExecRole): ProviderError {
  const share =
    role === 'command'
      ? `commands may use ${processLimitFor(processes, 'command')}, and ${cleanupLimitFor(processes)} to clean up`
      : `${WHO[role]} may use ${processLimitFor(processes, role)}`;
  return new ProviderError('insufficient_resources', {
    code: 'process_limit',
    detail:
      `The sandbox is at its process limit (${processes} processes and threads; ${share}), so ${WHO[role]} cannot start: ${WAY_OUT[role]}; ` +
      `kill_sandbox destroys the sandbox. The limit is --sandbox-processes or SANDBOX_MCP_SANDBOX_PROCESSES.`,
  });
}

/** The note for processes the sandbox's memory cgroup (or the ceiling of all sandboxes above it, `totalMemoryMb`) killed. */
export function memoryLimitNote(memoryMb: number, kills: number, totalMemoryMb: number | null = null): string {
  const reached =
    totalMemoryMb === null
      ? `The sandbox reached its memory limit (${memoryMb} MB, files in its writable mounts included)`
      : `The sandbox reached its memory limit (${memoryMb} MB, files in its writable mounts included), or all sandboxes together reached theirs (${totalMemoryMb} MB, --max-total-memory)`;
  return `${reached}: the kernel killed ${kills === 1 ? 'a process' : `${kills} processes`} (exit code 137, SIGKILL).`;
}

/** The note for writable mounts that are full. */
export function diskFullNote(paths: readonly string[], diskMb: number, isTemplate = false, hasWorkspace = false): string {
  const shares = Object.entries(diskSharesSixteenths(isTemplate, hasWorkspace))
    .map(([path, sixteenths]) => `${path === AGENT_STATE_MOUNT ? "the server's task logs" : path} ${(diskMb * sixteenths) / 16} MB`)
    .join(', ');
  return `The sandbox's disk is full at ${paths.join(', ')}: writes fail with ENOSPC until files are removed (its ${diskMb} MB budget is split: ${shares}).`;
}

/** The note for a sandbox whose processes fill its process limit. */
export function processLimitNote(processes: number): string {
  return (
    `The sandbox is at its process limit (${processes} processes and threads): new processes fail with EAGAIN (Resource temporarily unavailable). ` +
    'End what you left running with kill or pkill, or call stop_processes (it ends every process that is not part of a task).'
  );
}
