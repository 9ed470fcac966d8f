// Descriptors our own parent left open without close-on-exec would reach every child we spawn
// (spawn passes them on; bwrap and nsenter do not close them): found once in /proc/self/fdinfo,
// then covered with /dev/null in every keeper and command, so no host pipe or socket reaches a sandbox.
import { readdirSync, readFileSync } from 'node:fs';

/** Descriptors this process would pass on by accident, and an open /dev/null to put in their place. */
export interface FdCover {
  fds: readonly number[];
  devNullFd: number;
}

type StdioEntry = 'pipe' | 'ignore' | number;

/**
 * Completes a spawn stdio array so that every descriptor in `cover.fds` is /dev/null in the child
 * (spawn dup2s it there) instead of whatever this process inherited: spawn itself passes on any
 * descriptor that lacks close-on-exec, and bwrap and nsenter do not close them either.
 */
export function coverInherited(base: readonly StdioEntry[], cover?: FdCover): StdioEntry[] {
  const out = [...base];
  if (!cover) return out;
  for (const fd of cover.fds) {
    while (out.length <= fd) out.push('ignore');
    if (out[fd] === 'ignore') out[fd] = cover.devNullFd;
  }
  return out;
}

// O_CLOEXEC as /proc/<pid>/fdinfo's octal `flags:` shows it.
const O_CLOEXEC = 0o2000000;

/**
 * This process's descriptors (from 3 up) that a spawned child would inherit: ones our own parent
 * left open without close-on-exec (node opens everything close-on-exec). The provider covers
 * them in every child, so that no host pipe or socket reaches a sandbox.
 */
export function inheritableFds(): number[] {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fdinfo');
  } catch {
    return [];
  }
  const fds: number[] = [];
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd < 3) continue;
    try {
      const m = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'));
      if (m && (parseInt(m[1]!, 8) & O_CLOEXEC) === 0) fds.push(fd);
    } catch {
      // Closed meanwhile (e.g. the directory handle of the listing itself).
    }
  }
  return fds.sort((a, b) => a - b);
}
