// Parsing /proc/<pid>/stat, where both sides read a process's identity: the agent's status file
// and the local provider's keeper record each store a pid with its start time from here. Pure
// and dependency-free (the agent bundles it); reading the file stays with each caller.

/** The fields of /proc/<pid>/stat this project uses. */
export interface ProcStat {
  /** Field 3: one-letter state; `Z` is a zombie (dead, not yet reaped), `X`/`x` dead. */
  state: string;
  /** Field 4: the parent's pid. */
  ppid: number;
  /** Field 5: the process group id. */
  pgid: number;
  /** Field 9: the kernel's per-process flags (PF_*). */
  flags: number;
  /** Fields 14 and 15: CPU time spent, user and system, in clock ticks. */
  cpuTicks: number;
  /** Field 20: the number of threads. */
  threads: number;
  /** Field 22: start time in clock ticks since boot; with the pid it identifies a process. */
  startTime: number;
}

/** The fields of one /proc/<pid>/stat text, or null when it is not shaped like one. */
export function parseProcStat(text: string): ProcStat | null {
  // The command name (field 2) may contain spaces and parentheses: parse after the last ')'.
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  // fields[0] is field 3 (state), so field N is fields[N - 3].
  const fields = text.slice(close + 2).split(' ');
  const state = fields[0];
  const ppid = Number(fields[1]);
  const pgid = Number(fields[2]);
  const flags = Number(fields[6]);
  const cpuTicks = Number(fields[11]) + Number(fields[12]);
  const threads = Number(fields[17]);
  const startTime = Number(fields[19]);
  if (!state || ![ppid, pgid, flags, cpuTicks, threads, startTime].every(Number.isSafeInteger)) return null;
  return { state, ppid, pgid, flags, cpuTicks, threads, startTime };
}
