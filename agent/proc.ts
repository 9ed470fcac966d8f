// Identifying processes through /proc, so that no signal ever reaches a recycled pid.
import { readFileSync } from 'node:fs';
import { listPids } from '../shared/proc-pids.js';
import { parseProcStat, type ProcStat } from '../shared/proc-stat.js';

/** Parses /proc/<pid>/stat; null when the process does not exist (or /proc is unreadable). */
export function readProcStat(pid: number): ProcStat | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  return parseProcStat(text);
}

/** True when `pid` is alive (not a zombie) and started at `startTime`: the very process we recorded. */
export function isSameLiveProcess(pid: number, startTime: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 1) return false;
  const stat = readProcStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.startTime === startTime;
}

/** True when any process (zombies included) is still in process group `pgid`. */
export function isGroupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * True when a live (non-zombie) process remains in group `pgid`. Zombies are dead already; they
 * linger until their new parent reaps them, which some init processes do only every second or so.
 */
export function hasLiveGroupMembers(pgid: number): boolean {
  if (!isGroupAlive(pgid)) return false;
  const pids = listPids();
  if (pids === null) return true;
  for (const pid of pids) {
    const stat = readProcStat(pid);
    if (stat && stat.pgid === pgid && stat.state !== 'Z') return true;
  }
  return false;
}

/** Sends `signal` to every process of group `pgid`; false if the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}
