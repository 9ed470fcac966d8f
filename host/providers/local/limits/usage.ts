// Reading, from the host, whether a sandbox met its limits: its memory cgroup's OOM kills, its
// process count, and which writable mounts are full. Cheap (a few small files and statfs
// calls), so the provider asks only when a command failed or a task tool asks.
import { readdirSync, readFileSync, statfsSync } from 'node:fs';
import { join } from 'node:path';
import { diskSharesEighths } from './disk-shares.js';

// A mount with less than this free is full: ENOSPC for any write of some size.
const FULL_BELOW_BYTES = 1024 * 1024;

function readCounter(path: string, key: string): number | null {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(readFileSync(path, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** How many processes the sandbox's memory cgroup has OOM-killed so far (null without one). */
export function oomKills(cgroupDirs: readonly string[]): number | null {
  for (const dir of cgroupDirs) {
    const n = readCounter(join(dir, 'memory.oom_control'), 'oom_kill') ?? readCounter(join(dir, 'memory.events'), 'oom_kill');
    if (n !== null) return n;
  }
  return null;
}

/**
 * How many processes and threads the sandbox has: its pids cgroup's count, else its pid
 * namespace's tasks through pid 1's /proc (null when neither can be read).
 */
export function taskCount(cgroupDirs: readonly string[], pid1: number): number | null {
  for (const dir of cgroupDirs) {
    try {
      return Number(readFileSync(join(dir, 'pids.current'), 'utf8').trim());
    } catch {
      // Not the pids cgroup.
    }
  }
  const proc = `/proc/${pid1}/root/proc`;
  try {
    let n = 0;
    for (const name of readdirSync(proc)) {
      if (!/^[1-9]\d*$/.test(name)) continue;
      try {
        n += readdirSync(join(proc, name, 'task')).length;
      } catch {
        // Exited meanwhile.
      }
    }
    return n;
  } catch {
    return null;
  }
}

/** The writable mounts with (almost) no space left, seen through pid 1's root (`isTemplate`: a writable root; `hasWorkspace`: a workspace). */
export function fullMounts(pid1: number, isTemplate = false, hasWorkspace = false): string[] {
  const full: string[] = [];
  for (const path of Object.keys(diskSharesEighths(isTemplate, hasWorkspace))) {
    try {
      const st = statfsSync(join(`/proc/${pid1}/root`, path));
      if (st.bavail * st.bsize < FULL_BELOW_BYTES) full.push(path);
    } catch {
      // Gone with the sandbox.
    }
  }
  return full;
}
