// Keeping the OOM killer away from what holds the sandbox together. When its memory cgroup (or
// the host) runs out, the kernel kills the process with the highest score: never pid 1 (whose
// death ends the sandbox and its tasks) or bwrap (pid 1's parent: pid 1 dies with it). Lowering
// a score needs privilege, so a root keeper exempts both; without root the sandbox's workloads
// raise their own scores instead (entry-prelude.ts, the task supervisor's command).
import { writeFileSync } from 'node:fs';

/** oom_score_adj that exempts a process from the OOM killer. */
const OOM_EXEMPT = -1000;

/** Exempts the processes (pids the caller verified) from the OOM killer; false when it may not (not root) or could not. */
export function exemptFromOomKiller(pids: readonly number[]): boolean {
  if (process.geteuid?.() !== 0) return false;
  try {
    for (const pid of pids) writeFileSync(`/proc/${pid}/oom_score_adj`, String(OOM_EXEMPT));
    return true;
  } catch {
    return false;
  }
}
