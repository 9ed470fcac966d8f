// One sandbox's resource bounds: chosen at create from the server's settings and the caller's
// `cpu`/`memory` (each within the server's maximum), kept in the sandbox's spec, and enforced by
// the keeper (cgroups, sized tmpfs) and by every command that enters it (rlimits).
import { invalid } from '../validation.js';
import { MIN_MEMORY_MB, type LimitSettings } from './settings.js';

/** What a sandbox is bounded by (the spec's `limits`; absent in specs of servers before them). */
export interface SandboxLimits {
  /** Processes and threads the sandbox may have (see process-tiers.ts for who gets how many). */
  processes: number;
  /** Open files per process. */
  openFiles: number;
  /** Memory limit to enforce with a cgroup where one can be made: create's `memory`, else the server's default. */
  memoryMb: number;
  /** Budget of the writable mounts together, before the memory cap (see diskBudgetMb). */
  diskMb: number;
  /** The most memory all sandboxes of the state directory use together (their parent cgroup); absent in specs before it. */
  totalMemoryMb?: number;
}

/** What create asked for; absent fields take the server's defaults. */
export interface LimitAsk {
  cpu?: number | undefined;
  memoryMb?: number | undefined;
}

/**
 * Checks create's `cpu` and `memory` against the server's maxima (invalid_argument naming the
 * field and the maximum, never the value) and returns the sandbox's limits.
 */
export function chooseSandboxLimits(settings: LimitSettings, ask: LimitAsk): SandboxLimits {
  if (ask.cpu !== undefined) {
    if (!Number.isSafeInteger(ask.cpu) || ask.cpu < 1) throw invalid('cpu must be an integer of at least 1.');
    if (ask.cpu > settings.maxCpu) {
      throw invalid(
        `cpu is above this server's maximum of ${settings.maxCpu} (raise it with --max-sandbox-cpu or SANDBOX_MCP_MAX_SANDBOX_CPU).`,
      );
    }
  }
  if (ask.memoryMb !== undefined) {
    if (!Number.isSafeInteger(ask.memoryMb) || ask.memoryMb < MIN_MEMORY_MB) {
      throw invalid(`memory must be an integer of at least ${MIN_MEMORY_MB} MB.`);
    }
    if (ask.memoryMb > settings.maxMemoryMb) {
      throw invalid(
        `memory is above this server's maximum of ${settings.maxMemoryMb} MB (raise it with --max-sandbox-memory or SANDBOX_MCP_MAX_SANDBOX_MEMORY).`,
      );
    }
  }
  return {
    processes: settings.processes,
    openFiles: settings.openFiles,
    memoryMb: ask.memoryMb ?? settings.memoryMb,
    diskMb: settings.diskMb,
    totalMemoryMb: settings.maxTotalMemoryMb,
  };
}

/**
 * The writable mounts' budget once the memory limit is known: tmpfs pages are memory charged to
 * the sandbox's memory cgroup and the OOM killer cannot free them, so files may fill at most half
 * of an enforced memory limit. The other half always stays for processes, and a sandbox whose
 * disk is full can still run the command that cleans it up.
 */
export function diskBudgetMb(diskMb: number, enforcedMemoryMb: number | null): number {
  return enforcedMemoryMb === null ? diskMb : Math.min(diskMb, Math.floor(enforcedMemoryMb / 2));
}
