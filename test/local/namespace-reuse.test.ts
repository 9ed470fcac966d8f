// The sweeps that end a sandbox's stragglers find them by namespace number (`net:[…]`,
// `pid:[…]`), and the kernel gives a freed number to the next namespace made (measured:
// `unshare -n` twice in a row got the same one). A kill still sweeping a dead sandbox's network
// namespace, or its keeper its pid namespace, could so SIGKILL the pid 1 or helpers of a sandbox
// created meanwhile on the machine (by any server), failing that create (bwrap exits before ready:
// bwrap_failed). The sweeps spare what started after the sandbox began ending: real processes in
// namespaces of their own, started after the sweep's time, are neither listed nor killed.
import { readlinkSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { killNamespaceEnterers, netNamespace, processesInNetNamespace, ticksSinceBoot } from '../../host/providers/local/system/proc.js';
import { waitFor } from '../support/wait.js';

const started: ChildProcess[] = [];
afterEach(() => {
  for (const c of started.splice(0)) c.kill('SIGKILL');
});

/** `unshare <flags> <command>`, started at least one clock tick (10 ms) after `ticks`. */
async function laterProcess(ticks: number, flags: string, command = ['sleep', '30']): Promise<ChildProcess> {
  await waitFor(() => (ticksSinceBoot() ?? 0) > ticks + 1, 'a clock tick to pass');
  const child = spawn('unshare', [flags, ...command], { stdio: 'ignore' });
  started.push(child);
  return child;
}

describe('namespace sweeps spare what started after the sandbox began ending', () => {
  it("a kill's network-namespace sweep does not list a later process in a namespace of that number", async () => {
    const endingAt = ticksSinceBoot()!;
    const later = await laterProcess(endingAt, '-rn');
    const ns = await waitFor(() => {
      const n = netNamespace(later.pid!);
      return n !== null && n !== netNamespace('self') ? n : null;
    }, 'the process to be in its own network namespace');
    expect(processesInNetNamespace(ns)).toContain(later.pid);
    expect(processesInNetNamespace(ns, endingAt)).not.toContain(later.pid);
    // What started before the sweep's time is still found.
    expect(processesInNetNamespace(ns, ticksSinceBoot())).toContain(later.pid);
  });

  it("a keeper's pid-namespace sweep does not kill a later process whose children would be born in that namespace", async () => {
    const endingAt = ticksSinceBoot()!;
    // unshare -p without --fork: the shell stays outside the new namespace its child (a short
    // sleep, that namespace's pid 1) is born in, as nsenter's host-side half does.
    const later = await laterProcess(endingAt, '-rp', ['sh', '-c', 'sleep 5 & wait']);
    const ns = await waitFor(() => {
      try {
        const n = readlinkSync(`/proc/${later.pid}/ns/pid_for_children`);
        return n !== readlinkSync('/proc/self/ns/pid_for_children') ? n : null;
      } catch {
        return null;
      }
    }, 'the process to have its own pid namespace for children');
    expect(killNamespaceEnterers(ns, [], endingAt)).toBe(0);
    expect(later.exitCode === null && later.signalCode === null).toBe(true);
    const exited = new Promise((resolve) => later.once('exit', (_code, signal) => resolve(signal)));
    expect(killNamespaceEnterers(ns, [], ticksSinceBoot())).toBe(1);
    expect(await exited).toBe('SIGKILL');
  });
});
