// What is still running on this machine, read from /proc: to find a task's supervisor from the
// host, and to prove that nothing of a destroyed sandbox is left.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { isRunning } from './raw-stdio.js';

/** Pids of every process /proc lists now. */
export function allPids(): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number);
}

/** A process's argv, or [] when it is gone or unreadable. */
export function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/** The pid namespace a process is in (e.g. `pid:[4026532301]`), or undefined when gone. */
export function pidNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Running processes (zombies excluded) in the given pid namespace. */
export function runningIn(namespace: string): number[] {
  return allPids().filter((pid) => pidNamespace(pid) === namespace && isRunning(pid));
}

/** Running processes whose argv satisfies `matches`. */
export function runningWith(matches: (argv: string[]) => boolean): number[] {
  return allPids().filter((pid) => matches(cmdline(pid)) && isRunning(pid));
}
