// Keeping the OOM killer away from what holds the sandbox together: pid 1 (whose death ends the
// sandbox and its tasks) and bwrap (pid 1's parent: pid 1 dies with it). Neither is in the
// sandbox's cgroups (see spawnBwrap), so its memory cgroup's OOM killer never sees them; against
// the host's, a keeper with CAP_SYS_RESOURCE lowers their scores to -1000. Without it, the
// sandbox's commands raise their own scores instead (entry-prelude.ts, the task supervisor's command).
import { writeFileSync } from 'node:fs';

/** oom_score_adj that exempts a process from the OOM killer. */
const OOM_EXEMPT = -1000;

/** Exempts the processes (pids the caller verified) from the OOM killer; false when it may not (not root, or no CAP_SYS_RESOURCE). */
export function exemptFromOomKiller(pids: readonly number[]): boolean {
  if (process.geteuid?.() !== 0) return false;
  try {
    for (const pid of pids) writeFileSync(`/proc/${pid}/oom_score_adj`, String(OOM_EXEMPT));
    return true;
  } catch {
    return false;
  }
}
