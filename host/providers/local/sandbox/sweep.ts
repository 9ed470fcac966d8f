// The start-up sweep. A keeper killed -9 takes its sandbox with it (bwrap --die-with-parent) but
// leaves the sandbox's state directory and cgroups behind until some server looks at that id. So
// each provider instance looks at every id once, in the background as it starts: the registry's
// own checks decide what is dead (pid and start time against /proc; a create in progress, in
// this server or another, is left alone) and clean it up as they would on any other look. A
// server builds its local provider as soon as its transport is up, so a server start sweeps.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { SandboxRegistry } from './registry.js';
import { listSandboxIds } from './state-dir.js';

/**
 * Sweeps the state directory's `sandboxes` once, after the current turn of the event loop;
 * resolves with how many sandbox directories it removed; never rejects.
 */
export async function sweepDeadSandboxes(registry: SandboxRegistry, sandboxes: string): Promise<number> {
  // Not in the constructor's turn: the call that built the provider goes first.
  await new Promise((resolve) => setImmediate(resolve));
  try {
    const before = listSandboxIds(sandboxes);
    await registry.inspectAll();
    return before.filter((id) => !existsSync(join(sandboxes, id))).length;
  } catch {
    // A state directory we may not trust (or read) is reported by the next call that needs it.
    return 0;
  }
}
