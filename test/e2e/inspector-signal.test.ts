// No server-side process ever opens Node's inspector. SIGUSR1 is Node's signal for it, and the
// keeper uses SIGUSR1 for "re-read the deadline": a keeper that stopped handling it (while
// shutting down) would start a debugger on a loopback port, and a root keeper's debugger is code
// execution as root for whoever reaches the port. Here SIGUSR1 storms reach a keeper from the
// moment it is ready until it is gone — through set_sandbox_timeout, kill_sandbox and the
// deadline — the server meanwhile, and the netns helper a sandbox with an allow-list starts. With SANDBOX_MCP_DEBUG the
// keepers write to the server's stderr, where a debugger would announce itself.
import { readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import { connectStdio, ok, type StdioServer } from '../support/built-server.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { isRunning, runningWith, startTimeOf } from '../support/processes.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { sleep, waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
let s: StdioServer;

beforeAll(async () => {
  requireSandboxes();
  s = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_DEBUG: '1', SANDBOX_MCP_NETWORK_ALLOW: '127.0.0.1:9' });
});
afterAll(async () => {
  await s?.close();
  await destroyStateDir(stateDir);
});

/** The inspector's announcements (it prints one of these when it starts, or fails to). */
const INSPECTOR = /Debugger listening|inspector/i;

/**
 * Sends SIGUSR1 to `pid` (while it is the process that started at `startTime`) about every
 * millisecond, until stopped: far denser than a server's one signal per set_sandbox_timeout. Not
 * on every turn of the event loop: under that flood (tens of thousands a second) Node 26's V8 once
 * sat in a sleep loop timing the CPU (absl's NominalCPUFrequency, under a GC's Join) for over
 * 30 s, so the keeper missed its deadline; no server sends that, and nothing inside a sandbox can
 * signal its keeper.
 */
function storm(pid: number): { sent(): number; stop(): Promise<number> } {
  const startTime = startTimeOf(pid);
  let isStopped = false;
  let sent = 0;
  const done = (async () => {
    while (!isStopped) {
      try {
        if (startTimeOf(pid) !== startTime) break;
        process.kill(pid, 'SIGUSR1');
        sent++;
      } catch {
        break; // gone
      }
      await sleep(1);
    }
  })();
  return {
    sent: () => sent,
    async stop() {
      isStopped = true;
      await done;
      return sent;
    },
  };
}

function recordOf(sandboxId: string) {
  const rec = readKeeperRecord(join(stateDir, 'local', sandboxId.replace(/^local:/, '')));
  if (!rec) throw new Error('no keeper record');
  return rec;
}
const keeperOf = (sandboxId: string): number => recordOf(sandboxId).keeper.pid;

function netNamespace(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/net`);
  } catch {
    return undefined;
  }
}

/** Loopback TCP ports listening in the network namespace of `pid`. */
function listeningPorts(pid: number): number[] {
  const ports: number[] = [];
  for (const file of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${file}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      if (state === '0A' && local) ports.push(parseInt(local.split(':')[1]!, 16));
    }
  }
  return ports;
}

describe('SIGUSR1 never opens an inspector', () => {
  it('a keeper signalled throughout set_sandbox_timeout, kill_sandbox and its deadline, and the server meanwhile', async () => {
    const killed = (await ok(s.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
    // Its deadline is set once the storms have sent their hundred: a lifetime given at create (3 s
    // once) could end first on a loaded machine, where the storm's rate drops (233 in 3 s, beside
    // three busy loops).
    const expiring = (await ok(s.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
    const pids = [keeperOf(killed), keeperOf(expiring)];
    // The server itself too, while it serves the calls.
    const storms = [...pids, s.transport.pid!].map(storm);
    for (let i = 0; i < 5; i++) await ok(s.client, 'set_sandbox_timeout', { sandbox_id: killed, timeout: 300 });
    expect((await ok(s.client, 'run_command', { sandbox_id: killed, command: 'echo alive' })).stdout).toBe('alive\n');
    // Many signals before the kill, whatever the calls above took (they got faster; 94 once in CI).
    await waitFor(() => storms.every((st) => st.sent() > 100), 'a hundred signals to each');
    await ok(s.client, 'set_sandbox_timeout', { sandbox_id: expiring, timeout: 1 });
    await ok(s.client, 'kill_sandbox', { sandbox_id: killed });
    await waitFor(() => pids.every((pid) => !isRunning(pid)), 'both keepers to end (kill_sandbox, the deadline)');
    const sent = await Promise.all(storms.map((st) => st.stop()));
    // Each keeper was signalled many times, up to its last moments, and the server throughout.
    for (const n of sent) expect(n).toBeGreaterThan(100);
    expect(s.stderr()).not.toMatch(INSPECTOR);
    for (const id of [killed, expiring]) {
      expect((await s.client.callTool({ name: 'get_sandbox', arguments: { sandbox_id: id } })).isError).toBe(true);
    }
  });

  it("the keeper's netns helper, signalled while it serves a sandbox with an allow-list", async () => {
    const id = (await ok(s.client, 'create_sandbox', { timeout: 300, network: { allow_out: ['127.0.0.1:9'] } })).sandbox_id as string;
    const { keeper, pid1 } = recordOf(id);
    const sandboxNet = netNamespace(pid1.pid);
    const [helper] = runningWith((argv) => argv.includes('--netns-helper')).filter((pid) => netNamespace(pid) === sandboxNet);
    expect(helper, 'a netns helper in the sandbox network namespace').toBeDefined();
    // A debugger of the helper's would listen in the sandbox's network namespace, where the sandbox reaches it.
    const before = listeningPorts(helper!);
    const storms = [storm(helper!), storm(keeper.pid)];
    // Calls while the storms run: three, and more until each storm has sent a hundred signals,
    // whatever the calls take (three took 95 in CI, 44 beside three busy loops).
    const isServing = () => isRunning(helper!) && isRunning(keeper.pid);
    for (let i = 0; i < 3 || (storms.some((st) => st.sent() <= 100) && isServing()); i++) {
      await ok(s.client, 'run_command', { sandbox_id: id, command: 'true' });
    }
    const [sent] = await Promise.all(storms.map((st) => st.stop()));
    expect(sent).toBeGreaterThan(100);
    expect(isRunning(helper!)).toBe(true);
    expect(listeningPorts(helper!)).toEqual(before);
    expect(s.stderr()).not.toMatch(INSPECTOR);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });
});
