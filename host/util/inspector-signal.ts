// Node starts its inspector (a debugger on a loopback port) when the process gets SIGUSR1 and no
// JavaScript listener for it is installed. A debugger in the server, a keeper or a keeper's netns
// helper (which listens in the sandbox's own network namespace) is code execution as that
// process's user — root for a root server — for whoever reaches the port. So every such process
// keeps a SIGUSR1 listener for its whole life. A keeper's netns helper also gets Node's
// `--disable-sigusr1` where the Node that runs it has it (no window before the listener). A keeper
// does not: that flag leaves SIGUSR1 blocked in every thread (Node blocks it at start-up and
// unblocks it only for the inspector), so no JavaScript listener ever runs, and SIGUSR1 is the
// keeper's "re-read the deadline".
import { realpathSync } from 'node:fs';

/** Whether paths `a` and `b` name one file (after links); their text when either cannot be resolved. */
export function sameFile(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return a === b;
  }
}

/**
 * Node options that keep SIGUSR1 from ever starting an inspector in a process run by `nodePath`:
 * `--disable-sigusr1` where that Node has it (Node 22.14, 23.7 and later; known only when
 * `nodePath` is the Node running this code, whose `allowedNodeEnvironmentFlags` list it).
 */
export function noInspectorSignalFlags(
  nodePath: string,
  knownFlags: ReadonlySet<string> = process.allowedNodeEnvironmentFlags,
  execPath = process.execPath,
): string[] {
  return knownFlags.has('--disable-sigusr1') && sameFile(nodePath, execPath) ? ['--disable-sigusr1'] : [];
}

let isGuarded = false;

/** Installs a SIGUSR1 listener that is never removed: from now on SIGUSR1 cannot start the inspector. */
export function keepInspectorClosed(): void {
  if (isGuarded) return;
  isGuarded = true;
  process.on('SIGUSR1', () => {
    // Nothing: the listener's presence is the point. Others (the keeper's deadline) may add theirs.
  });
}
