// Reading, from the host, what a sandbox uses and whether it met its limits: its memory cgroup's
// usage and OOM kills, its process count, and how full its writable mounts are. Cheap (a few
// small files and statfs calls): the provider asks when a command failed, a task tool asks, or a
// person looks (the dashboard).
import { readdirSync, readFileSync, statfsSync, type StatsFs } from 'node:fs';
import { join } from 'node:path';
import { BeneathDir } from '../../../util/beneath.js';
import { readSmallKernelFile } from '../system/proc.js';
import { sandboxOwnMounts } from './disk-shares.js';

// A mount with less than this free is full: ENOSPC for any write of some size.
const FULL_BELOW_BYTES = 1024 * 1024;

const OOM_KILL_LINE = /^oom_kill (\d+)$/m;

/** The `oom_kill` counter of a memory cgroup file (read at every command's start: one read). */
function readOomKills(path: string): number | null {
  const text = readSmallKernelFile(path);
  const m = text === null ? null : OOM_KILL_LINE.exec(text);
  return m ? Number(m[1]) : null;
}

/** How many processes the sandbox's memory cgroup has OOM-killed so far (null without one). */
export function oomKills(cgroupDirs: readonly string[]): number | null {
  for (const dir of cgroupDirs) {
    const n = readOomKills(join(dir, 'memory.oom_control')) ?? readOomKills(join(dir, 'memory.events'));
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

/**
 * statfs of `path` in the sandbox of `pid1`, walked from its root one name at a time without
 * following a symlink (util/beneath.ts): an absolute link met through /proc/<pid>/root would
 * resolve on the host. Throws when the path cannot be walked (gone, or not a directory).
 */
function statfsInSandbox(pid1: number, path: string): StatsFs {
  return BeneathDir.openRoot(`/proc/${pid1}/root/.`).use((root) =>
    root.openPath(path.replace(/^\/+/, '')).use((dir) => statfsSync(`/proc/self/fd/${dir.fd}`)),
  );
}

/** The writable mounts with (almost) no space left, seen through pid 1's root (`isTemplate`: a writable root; `hasWorkspace`: a workspace). */
export function fullMounts(pid1: number, isTemplate = false, hasWorkspace = false): string[] {
  const full: string[] = [];
  for (const path of sandboxOwnMounts(isTemplate, hasWorkspace)) {
    try {
      const st = statfsInSandbox(pid1, path);
      if (st.bavail * st.bsize < FULL_BELOW_BYTES) full.push(path);
    } catch {
      // Gone with the sandbox.
    }
  }
  return full;
}

/**
 * Bytes the sandbox's memory cgroup holds now (cgroup v2 memory.current, v1 memory.usage_in_bytes):
 * its processes and the files in its tmpfs mounts. Null without a memory cgroup.
 */
export function memoryBytes(cgroupDirs: readonly string[]): number | null {
  for (const dir of cgroupDirs) {
    for (const file of ['memory.current', 'memory.usage_in_bytes']) {
      try {
        const n = Number(readFileSync(join(dir, file), 'utf8').trim());
        if (Number.isSafeInteger(n)) return n;
      } catch {
        // Not the memory cgroup, or the other version's file.
      }
    }
  }
  return null;
}

/**
 * Bytes used in the writable mounts together, seen through pid 1's root (`isTemplate`: a writable
 * root); null when none can be read (the sandbox is gone).
 */
export function diskBytes(pid1: number, isTemplate = false, hasWorkspace = false): number | null {
  let used: number | null = null;
  for (const path of sandboxOwnMounts(isTemplate, hasWorkspace)) {
    try {
      const st = statfsInSandbox(pid1, path);
      used = (used ?? 0) + (st.blocks - st.bfree) * st.bsize;
    } catch {
      // Gone with the sandbox.
    }
  }
  return used;
}
