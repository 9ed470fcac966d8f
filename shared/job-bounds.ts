// The shell text that bounds a command before it runs: its rlimits and its OOM score. Written
// once here because two places render it: the host's entry prelude (commands that enter a sandbox
// with nsenter) and the resident agent (commands it spawns inside). Only shell builtins: nothing
// forks before the limits hold. POSIX sh and bash alike.

/** The bounds of one command, as numbers (the host decides them; see process-tiers.ts). */
export interface JobBounds {
  /** RLIMIT_NPROC, soft and hard, of everything the command starts. */
  processes: number;
  /** RLIMIT_NOFILE, soft and hard. */
  openFiles: number;
  /** Raise the command's OOM score adjustment to this (never lowers it); null leaves it. */
  oomScoreAdj: number | null;
}

/** Sets one rlimit, soft first (lowering the hard limit below the soft one fails); `alt` is dash's letter for it. */
export function setLimit(letter: string, value: number, alt?: string): string {
  const one = (kind: string) =>
    `ulimit -${kind} -${letter} ${value} 2>/dev/null` + (alt ? ` || ulimit -${kind} -${alt} ${value} 2>/dev/null` : '');
  return `${one('S')}; ${one('H')}; `;
}

/**
 * Shell text (ending in `; `) setting RLIMIT_NPROC, RLIMIT_NOFILE and RLIMIT_CORE (0: a crash
 * dumps no core, which a host's coredump handler would keep outside the sandbox's disk budget). A
 * limit above the caller's own hard limit cannot be set and stays the caller's.
 */
export function rlimitText(processes: number, openFiles: number): string {
  // bash calls RLIMIT_NPROC -u, dash -p (in bash -p is the pipe size, which cannot be set).
  return setLimit('u', processes, 'p') + setLimit('n', openFiles) + setLimit('c', 0);
}

/** Shell text (ending in `; `) raising the shell's OOM score adjustment to `adj` (quietly kept where it is higher). */
export function oomScoreText(adj: number): string {
  return `{ echo ${adj} > /proc/self/oom_score_adj; } 2>/dev/null; `;
}

/** The whole bounds text of a command (rlimits, then the OOM score). */
export function jobBoundsText(b: JobBounds): string {
  return rlimitText(b.processes, b.openFiles) + (b.oomScoreAdj !== null ? oomScoreText(b.oomScoreAdj) : '');
}
