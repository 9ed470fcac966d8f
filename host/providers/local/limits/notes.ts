// What the tools say when a sandbox meets one of its limits: static sentences of ours, built from
// numbers only (never from a command's output), for errors and for the notes results carry.
import { ProviderError } from '../../provider-error.js';
import type { ExecRole } from '../../provider.js';
import { diskSharesEighths } from './disk-shares.js';
import { processLimitFor } from './process-tiers.js';

/** insufficient_resources for a create beyond the server's maximum of live sandboxes. */
export function tooManySandboxes(max: number): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'sandbox_limit',
    detail:
      `This server allows at most ${max} live local sandboxes (counted in its state directory, so other servers sharing it count too): ` +
      'destroy one with kill_sandbox, or raise the limit with --max-sandboxes or SANDBOX_MCP_MAX_SANDBOXES.',
  });
}

const STOP_SOME: Readonly<Record<ExecRole, string>> = {
  task: 'stop some of its processes (run_command with kill or pkill, cancel_task) or destroy it with kill_sandbox',
  command: 'stop some of its processes (cancel_task) or destroy it with kill_sandbox',
  service: 'destroy it with kill_sandbox',
};

/** insufficient_resources for a command refused because the sandbox has no process left for it. */
export function processLimitReached(processes: number, role: ExecRole): ProviderError {
  const what = role === 'task' ? 'a task' : role === 'command' ? 'a command' : 'the task agent';
  return new ProviderError('insufficient_resources', {
    code: 'process_limit',
    detail:
      `The sandbox is at its process limit (${processes} processes and threads; ${what} may use ${processLimitFor(processes, role)}), ` +
      `so ${what} cannot start: ${STOP_SOME[role]}. The limit is --sandbox-processes or SANDBOX_MCP_SANDBOX_PROCESSES.`,
  });
}

/** The note for processes the sandbox's memory cgroup killed. */
export function memoryLimitNote(memoryMb: number, kills: number): string {
  return (
    `The sandbox reached its memory limit (${memoryMb} MB, files in its writable mounts included): ` +
    `the kernel killed ${kills === 1 ? 'a process' : `${kills} processes`} (exit code 137, SIGKILL).`
  );
}

/** The note for writable mounts that are full. */
export function diskFullNote(paths: readonly string[], diskMb: number, isTemplate = false): string {
  const shares = Object.entries(diskSharesEighths(isTemplate))
    .map(([path, eighths]) => `${path} ${(diskMb * eighths) / 8} MB`)
    .join(', ');
  return `The sandbox's disk is full at ${paths.join(', ')}: writes fail with ENOSPC until files are removed (its ${diskMb} MB budget is split: ${shares}).`;
}

/** The note for a sandbox whose processes fill its process limit. */
export function processLimitNote(processes: number): string {
  return `The sandbox is at its process limit (${processes} processes and threads): new processes fail with EAGAIN (Resource temporarily unavailable).`;
}
