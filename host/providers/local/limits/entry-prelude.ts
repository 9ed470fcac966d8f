// The first statements of every command that enters a sandbox. Commands enter with nsenter from
// the host, so they inherit nothing of pid 1's: each entry's first shell joins the sandbox's
// cgroups, checks that the sandbox has room for it, sets the sandbox's rlimits (inherited by
// everything it starts) and, for the caller's own commands, raises its OOM score. Only shell
// builtins: nothing forks before the limits hold. Pure text, unit-tested; POSIX sh and bash alike.
import { oomScoreText, setLimit } from '../../../../shared/job-bounds.js';
import type { ExecRole } from '../../provider.js';
import { cleanupFrom, cleanupLimitFor, processLimitFor, refuseStartAt } from './process-tiers.js';
import type { SandboxLimits } from './sandbox-limits.js';

/** Descriptor of the first cgroup.procs file an entry joins (the rest follow: 6, 7). */
export const CGROUP_FD_BASE = 5;

/** Exit status of an entry refused because the sandbox has no room for it (with REFUSED_MESSAGE on stderr). */
export const REFUSED_EXIT = 196;
/** The one line a refused entry writes on stderr. */
export const REFUSED_MESSAGE = 'sandbox-mcp: the sandbox is at its process limit';

/** Exit status of an entry that could not join the sandbox's cgroups (as the host-side join script). */
export const JOIN_FAILED_EXIT = 125;

/** OOM score adjustment of the caller's own commands: chosen before the server's helpers, like a task's command. */
export const COMMAND_OOM_SCORE_ADJ = 500;

/** The rlimits an entry sets, and when it is refused instead. */
export interface EntryRlimits {
  /** RLIMIT_NPROC, soft and hard, of everything the entry starts. */
  processes: number;
  /** Refuse the entry when the sandbox already has this many processes and threads. */
  refuseAt: number;
  /** From this many processes and threads on, RLIMIT_NPROC is `processes` of this instead (run_command's reserve for cleaning up). */
  cleanup?: { from: number; processes: number };
  /** RLIMIT_NOFILE, soft and hard. */
  openFiles: number;
}

/** What the first shell of an entry applies (see entryPrelude). */
export interface EntryBounds {
  /** How many cgroup.procs descriptors the server passes (at CGROUP_FD_BASE, …): the shell joins each. */
  cgroupFdCount: number;
  /** null: the inherited rlimits stay (a sandbox from before limits). */
  rlimits: EntryRlimits | null;
  /** Raise the entry's OOM score adjustment to this (never lowers it); null leaves it. */
  oomScoreAdj: number | null;
}

/**
 * Shell text (ending in `; `) that joins the cgroups, refuses the entry with REFUSED_EXIT when the
 * sandbox is full, sets RLIMIT_NPROC, RLIMIT_NOFILE and RLIMIT_CORE (0: a crash dumps no core,
 * which a host's coredump handler would keep outside the sandbox's disk budget), and raises the
 * OOM score. A limit above the server's own hard limit cannot be set and stays the server's.
 */
export function entryPrelude(b: EntryBounds): string {
  let text = '';
  if (b.cgroupFdCount > 0) {
    const fds = Array.from({ length: b.cgroupFdCount }, (_, i) => CGROUP_FD_BASE + i);
    text += `{ ${fds.map((fd) => `echo $$ >&${fd}`).join(' && ')}; } 2>/dev/null || exit ${JOIN_FAILED_EXIT}; exec ${fds.map((fd) => `${fd}>&-`).join(' ')}; `;
  }
  const r = b.rlimits;
  if (r) {
    // Counts this sandbox's threads with a glob (no fork); the positional parameters stay untouched.
    text +=
      `__sandbox_mcp_count() { __sandbox_mcp_n=$#; }; __sandbox_mcp_count /proc/[1-9]*/task/[1-9]*; ` +
      `if [ "$__sandbox_mcp_n" -ge ${r.refuseAt} ]; then echo '${REFUSED_MESSAGE}' >&2; exit ${REFUSED_EXIT}; fi; `;
    // bash calls RLIMIT_NPROC -u, dash -p (in bash -p is the pipe size, which cannot be set).
    text += r.cleanup
      ? `if [ "$__sandbox_mcp_n" -ge ${r.cleanup.from} ]; then ${setLimit('u', r.cleanup.processes, 'p')}else ${setLimit('u', r.processes, 'p')}fi; `
      : setLimit('u', r.processes, 'p');
    text += `unset -f __sandbox_mcp_count; unset __sandbox_mcp_n; ` + setLimit('n', r.openFiles) + setLimit('c', 0);
  }
  if (b.oomScoreAdj !== null) text += oomScoreText(b.oomScoreAdj);
  return text;
}

/**
 * The prelude of an entry of `role` into a sandbox bounded by `limits`, joining `cgroupFdCount`
 * cgroups from descriptors; empty for a sandbox from before limits that joins none.
 */
export function preludeFor(limits: SandboxLimits | undefined, role: ExecRole, cgroupFdCount: number): string {
  if (!limits && cgroupFdCount === 0) return '';
  return entryPrelude({
    cgroupFdCount,
    rlimits: limits
      ? {
          processes: processLimitFor(limits.processes, role),
          refuseAt: refuseStartAt(limits.processes, role),
          openFiles: limits.openFiles,
          ...(role === 'command' ? { cleanup: { from: cleanupFrom(limits.processes), processes: cleanupLimitFor(limits.processes) } } : {}),
        }
      : null,
    oomScoreAdj: limits && role === 'command' ? COMMAND_OOM_SCORE_ADJ : null,
  });
}
