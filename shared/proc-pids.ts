// The processes /proc lists: its numeric entries. Both sides walk them (the agent to count threads
// and find a group's members, the keeper to find nsenter's host-side halves); the agent bundles
// this, so it reads /proc with node:fs alone.
import { readdirSync } from 'node:fs';

/**
 * The pids of the processes this pid namespace's /proc shows, in its order; null when /proc
 * cannot be read (each caller decides what that means for it).
 */
export function listPids(): number[] | null {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return null;
  }
  const pids: number[] = [];
  for (const name of names) {
    // /proc/[1-9]*: a process's entry is its pid; the others (self, sys, net…) begin with a letter.
    const c = name.charCodeAt(0);
    if (c >= 49 && c <= 57) pids.push(Number(name));
  }
  return pids;
}
