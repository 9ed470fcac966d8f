// Holding processes still with the cgroup v1 freezer: a frozen task does not act even on SIGKILL
// until it is thawed (cgroup v2's freezer lets a fatal signal through), so a test can hold the
// moment between a process being sent SIGKILL and its being seen exiting — a moment a loaded
// machine makes on its own, briefly and by chance. Needs root and a v1 freezer hierarchy.
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ownV1Dir } from './cgroup-situation.js';
import { waitFor } from './wait.js';

/** Where this process may make freezer cgroups, or null (no v1 freezer here, or not root). */
function freezerParent(): string | null {
  return process.getuid?.() === 0 ? ownV1Dir('freezer') : null;
}

/** True where freezeProcesses works: root, with a cgroup v1 freezer hierarchy mounted. */
export function canFreezeProcesses(): boolean {
  return freezerParent() !== null;
}

/**
 * Moves `pids` (alone: their children stay where they are) into a freezer cgroup of their own and
 * freezes it; resolves once they are frozen, with the function that thaws them, moves back those
 * that still run and removes the cgroup.
 */
export async function freezeProcesses(pids: readonly number[]): Promise<() => Promise<void>> {
  const parent = freezerParent();
  if (parent === null) throw new Error('no cgroup v1 freezer to freeze processes with');
  const dir = join(parent, `sandbox-mcp-test-freeze-${process.pid}-${pids[0]}`);
  mkdirSync(dir);
  const state = join(dir, 'freezer.state');
  for (const pid of pids) writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  writeFileSync(state, 'FROZEN');
  // FREEZING until every task in it has stopped.
  await waitFor(() => readFileSync(state, 'utf8').trim() === 'FROZEN', 'the processes to freeze');
  return async () => {
    writeFileSync(state, 'THAWED');
    for (const pid of pids) {
      try {
        writeFileSync(join(parent, 'cgroup.procs'), String(pid));
      } catch {
        // It exited meanwhile (a SIGKILL it had pending): it left the cgroup by itself.
      }
    }
    await waitFor(() => {
      try {
        rmdirSync(dir);
        return true;
      } catch {
        return false;
      }
    }, 'the freezer cgroup to be empty');
  };
}
