// The server's resource bounds for local sandboxes: what every sandbox gets unless create asks
// for something else, and the most create may ask for. Chosen for the reference user, a laptop
// running a handful of agent sandboxes; docs/local-provider.md justifies each default.
import { availableParallelism, totalmem } from 'node:os';
import { ProviderError } from '../../provider-error.js';
import { invalid } from '../validation.js';

const MIB = 1024 * 1024;

/** Smallest memory limit, in MB, that leaves room for the sandbox's own pid 1 and a shell. */
export const MIN_MEMORY_MB = 32;

/** Smallest process limit: the server keeps 96 of them for its own tools (see process-tiers.ts). */
export const MIN_PROCESSES = 256;

/** Live local sandboxes per state directory, by default. */
export const DEFAULT_MAX_SANDBOXES = 16;
/** Processes and threads per sandbox, by default. */
export const DEFAULT_PROCESSES = 1024;
/** Open files per process, by default. */
export const DEFAULT_OPEN_FILES = 4096;
/** The writable mounts' budget together, in MiB, by default. */
export const DEFAULT_DISK_MB = 2048;
/** The default memory limit is a quarter of this machine's memory, but never above this. */
export const DEFAULT_MEMORY_CAP_MB = 4096;

/** Resource options of the local provider (LocalProviderOpts.limits); every one has a default. */
export interface LimitOpts {
  /** Live sandboxes in the state directory (all servers sharing it); the next create is refused. */
  maxSandboxes?: number;
  /** Processes and threads one sandbox may have (RLIMIT_NPROC per sandbox; pids.max with a cgroup). */
  processes?: number;
  /** Open files per process (RLIMIT_NOFILE). */
  openFiles?: number;
  /** Memory limit of a sandbox whose create names none, in MiB (needs a cgroup). */
  memoryMb?: number;
  /** The most `memory` create may ask for, in MiB. */
  maxMemoryMb?: number;
  /** The most `cpu` create may ask for. */
  maxCpu?: number;
  /** The most memory all sandboxes of the state directory may use together, in MiB (a parent memory cgroup). */
  maxTotalMemoryMb?: number;
  /** Size of the writable mounts together (/home/user, /tmp, /var/tmp, /dev/shm), in MiB. */
  diskMb?: number;
}

/** LimitOpts with every default applied; fixed for the life of a provider instance. */
export type LimitSettings = Readonly<Required<LimitOpts>>;

/** A quarter of this machine's memory, at most DEFAULT_MEMORY_CAP_MB (and at least MIN_MEMORY_MB). */
export function defaultMemoryMb(totalBytes = totalmem()): number {
  return Math.max(MIN_MEMORY_MB, Math.min(DEFAULT_MEMORY_CAP_MB, Math.floor(totalBytes / MIB / 4)));
}

/** Half of this machine's memory (and never below the default limit). */
export function defaultMaxMemoryMb(totalBytes = totalmem()): number {
  return Math.max(defaultMemoryMb(totalBytes), Math.floor(totalBytes / MIB / 2));
}

/**
 * All sandboxes together, by default: half of this machine's memory (the other half stays for the
 * person's own programs on a laptop), as much as one sandbox may ask for.
 */
export function defaultMaxTotalMemoryMb(totalBytes = totalmem()): number {
  return defaultMaxMemoryMb(totalBytes);
}

/** Codes of the settings that contradict each other (the configuration names the flags). */
export type LimitConflict = 'memory_above_max' | 'max_memory_above_total';

function conflict(code: LimitConflict, detail: string): ProviderError {
  return new ProviderError('invalid_argument', { code, detail });
}

function intAtLeast(value: number | undefined, fallback: number, min: number, name: string): number {
  const n = value ?? fallback;
  if (!Number.isSafeInteger(n) || n < min) throw invalid(`The local provider's ${name} must be an integer of at least ${min}.`);
  return n;
}

/**
 * Applies the defaults (a default never exceeds a maximum set explicitly); throws invalid_argument
 * naming the option that is out of range, with a LimitConflict code when two contradict each other.
 */
export function resolveLimitSettings(opts: LimitOpts = {}): LimitSettings {
  const maxTotalMemoryMb = intAtLeast(opts.maxTotalMemoryMb, defaultMaxTotalMemoryMb(), MIN_MEMORY_MB, 'maxTotalMemoryMb');
  const maxMemoryMb = intAtLeast(opts.maxMemoryMb, Math.min(defaultMaxMemoryMb(), maxTotalMemoryMb), MIN_MEMORY_MB, 'maxMemoryMb');
  const memoryMb = intAtLeast(opts.memoryMb, Math.min(defaultMemoryMb(), maxMemoryMb), MIN_MEMORY_MB, 'memoryMb');
  if (memoryMb > maxMemoryMb) throw conflict('memory_above_max', "The local provider's memoryMb must not be above its maxMemoryMb.");
  if (maxMemoryMb > maxTotalMemoryMb) {
    throw conflict('max_memory_above_total', "The local provider's maxMemoryMb must not be above its maxTotalMemoryMb.");
  }
  return {
    maxTotalMemoryMb,
    maxSandboxes: intAtLeast(opts.maxSandboxes, DEFAULT_MAX_SANDBOXES, 1, 'maxSandboxes'),
    processes: intAtLeast(opts.processes, DEFAULT_PROCESSES, MIN_PROCESSES, 'processes'),
    openFiles: intAtLeast(opts.openFiles, DEFAULT_OPEN_FILES, 64, 'openFiles'),
    memoryMb,
    maxMemoryMb,
    maxCpu: intAtLeast(opts.maxCpu, availableParallelism(), 1, 'maxCpu'),
    diskMb: intAtLeast(opts.diskMb, DEFAULT_DISK_MB, 16, 'diskMb'),
  };
}
