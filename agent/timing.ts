// Every duration the agent waits for, in one place. Defaults suit production; tests and the
// selftest shrink them through SANDBOX_AGENT_* environment variables instead of sleeping.
import { LIMITS } from '../shared/limits.js';

/** Durations (milliseconds) the agent and its supervisors wait for. */
export interface Timings {
  /** Supervisor: TERM to the process group, then KILL after this long. */
  graceMs: number;
  /** Supervisor: once the group is gone, wait this long for pipe EOF (an escaped process may hold them). */
  drainMs: number;
  /** Poll interval for get's long-poll, cancel's confirmation and the supervisor's group checks. */
  pollMs: number;
  /** cancel waits at most this long for a confirmed terminal state. */
  cancelConfirmMs: number;
  /** start waits at most this long for the supervisor's first status. */
  startReportMs: number;
  /** After the first status, start waits this long more for a short command to finish. */
  startSettleMs: number;
  /** input: how long a write may wait for room in a full stdin pipe, and for `eof` to be confirmed. */
  inputWaitMs: number;
  /** Resident: how long a supervisor booted ahead waits for a start before it is retired (warm-supervisor.ts). */
  warmIdleMs: number;
  /** Resident: how long no request may arrive before the next supervisor boots (0: as soon as the call is answered). */
  warmQuietMs: number;
}

/** Production defaults; graceMs + drainMs stays below cancelConfirmMs so a stubborn task is still confirmed. */
export const DEFAULT_TIMINGS: Timings = {
  graceMs: 2000,
  drainMs: 500,
  pollMs: 50,
  cancelConfirmMs: LIMITS.cancelConfirmMs,
  // A supervisor writes its first status within ~100 ms, but on a loaded machine (a sandbox's own
  // fork or memory storm next door) a node start-up has taken over 5 s: past this bound start answers
  // `unknown` (no_status) for a task that is in fact starting. The host's start call allows 60 s.
  startReportMs: 20000,
  startSettleMs: 100,
  inputWaitMs: 1000,
  // Long enough to carry an agent's burst of commands, short enough that an idle sandbox soon
  // holds only its keeper and resident within 5 s of its last call (issue 36: 20 MiB PSS).
  warmIdleMs: 3_000,
  // Longer than the gap between calls back to back (a few ms), short against an agent's pause.
  warmQuietMs: 20,
};

const ENV_NAMES: Record<keyof Timings, string> = {
  graceMs: 'SANDBOX_AGENT_GRACE_MS',
  drainMs: 'SANDBOX_AGENT_DRAIN_MS',
  pollMs: 'SANDBOX_AGENT_POLL_MS',
  cancelConfirmMs: 'SANDBOX_AGENT_CANCEL_CONFIRM_MS',
  startReportMs: 'SANDBOX_AGENT_START_REPORT_MS',
  startSettleMs: 'SANDBOX_AGENT_START_SETTLE_MS',
  inputWaitMs: 'SANDBOX_AGENT_INPUT_WAIT_MS',
  warmIdleMs: 'SANDBOX_AGENT_WARM_IDLE_MS',
  warmQuietMs: 'SANDBOX_AGENT_WARM_QUIET_MS',
};

/** The defaults, each overridden by its SANDBOX_AGENT_* variable when that holds a non-negative integer. */
export function readTimings(env: NodeJS.ProcessEnv): Timings {
  const out = { ...DEFAULT_TIMINGS };
  for (const key of Object.keys(ENV_NAMES) as (keyof Timings)[]) {
    const raw = env[ENV_NAMES[key]];
    if (raw !== undefined && /^\d{1,7}$/.test(raw)) out[key] = Number(raw);
  }
  return out;
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
