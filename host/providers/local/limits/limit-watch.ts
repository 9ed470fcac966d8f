// Which limits a sandbox met, as the notes tool results carry: the OOM kills of its memory cgroup
// (since a command started, or ever), its writable mounts that are full, and a process count at
// the point where tasks can no longer start.
import type { LiveSandbox } from '../sandbox/registry.js';
import { diskFullNote, memoryLimitNote, processLimitNote } from './notes.js';
import { processLimitFor } from './process-tiers.js';
import { fullMounts, oomKills, taskCount } from './usage.js';

/** Notes about the limits `sb` has met: OOM kills beyond `oomKillsBefore`, full mounts, a full process table. */
export function limitNotes(sb: LiveSandbox, oomKillsBefore = 0): string[] {
  const { limits } = sb.spec;
  const enforced = sb.keeper.enforced;
  if (!limits || !enforced) return [];
  const notes: string[] = [];
  const kills = (oomKills(sb.keeper.cgroups) ?? 0) - oomKillsBefore;
  if (kills > 0 && enforced.memoryMb !== null) notes.push(memoryLimitNote(enforced.memoryMb, kills, enforced.totalMemoryMb ?? null));
  const isTemplate = sb.spec.root !== undefined;
  const hasWorkspace = sb.spec.workspace !== undefined;
  const full = enforced.diskMb !== null ? fullMounts(sb.keeper.pid1.pid, isTemplate, hasWorkspace) : [];
  if (full.length > 0 && enforced.diskMb !== null) notes.push(diskFullNote(full, enforced.diskMb, isTemplate, hasWorkspace));
  const tasks = taskCount(sb.keeper.cgroups, sb.keeper.pid1.pid);
  if (tasks !== null && tasks >= processLimitFor(limits.processes, 'task')) notes.push(processLimitNote(limits.processes));
  return notes;
}

/** One command's view of the limits: the OOM kill count when it started, compared after it ended. */
export class LimitWatch {
  private readonly oomKillsBefore: number;

  constructor(private readonly sb: LiveSandbox) {
    this.oomKillsBefore = sb.spec.limits ? (oomKills(sb.keeper.cgroups) ?? 0) : 0;
  }

  /** The notes about limits met since the command started; undefined when there are none. */
  notesSince(): string[] | undefined {
    const notes = limitNotes(this.sb, this.oomKillsBefore);
    return notes.length > 0 ? notes : undefined;
  }
}
