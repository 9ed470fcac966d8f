// Fault injection over the built server and real local sandboxes: at a random point of a running
// task, kill -9 the server, the task's supervisor, the sandbox's keeper, or its resident agent
// (while it runs a run_command call itself); then read every task from a (new) server. A task
// reads its true outcome or `unknown` — never a made-up success — and every byte a reader saw
// before the fault is still there; a sandbox whose keeper died is gone (`not_found`); a resident's
// death loses nothing at all (the call in flight still answers with its command's true outcome).
// Once the sandbox is killed, none of its processes and no state directory remain.
// Random choices come from one seed (FAULT_SEED, default below), printed with any failure.
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { isAlive as isProcAlive, type ProcIdentity } from '../../host/providers/local/system/proc.js';
import { localServers, ok, type StdioServer, toolError } from '../support/built-server.js';
import { cmdline, holdNamespace, isRunning, runningIn, runningWith } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const SEED = Number(process.env.FAULT_SEED ?? 20261130);
const ROUNDS_PER_FAULT = 3;
const FAULTS = ['server', 'supervisor', 'keeper', 'resident'] as const;
type Fault = (typeof FAULTS)[number];

const servers = localServers();
const { stateDir } = servers;

/** mulberry32: a small deterministic PRNG, so a failing run can be replayed with its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A task printing numbered lines and exiting with `exitCode`: its whole true output is known in advance. */
function lineTask(
  lines: number,
  intervalS: number,
  exitCode: number,
): { command: string; stdout: string; state: string; exitCode: number } {
  return {
    command: `for i in $(seq 1 ${lines}); do echo "line-$i"; sleep ${intervalS}; done; exit ${exitCode}`,
    stdout: Array.from({ length: lines }, (_, i) => `line-${i + 1}\n`).join(''),
    state: exitCode === 0 ? 'succeeded' : 'failed',
    exitCode,
  };
}

type Handle = { sandbox_id: string; task_id: string };

/** Reads a task from offset 0 until its state is no longer `running` (bounded); returns the last view and all stdout. */
async function readToEnd(s: StdioServer, handle: Handle): Promise<{ state: string; exit_code: number | null; stdout: string }> {
  let stdout = '';
  let offset = 0;
  let view: Record<string, any> = {};
  await waitFor(
    async () => {
      view = await ok(s.client, 'get_task', { ...handle, stdout_offset: offset, limit: 65536, wait: 5 });
      stdout += view.stdout as string;
      offset = view.stdout_next_offset as number;
      return view.state !== 'running';
    },
    'the task to leave `running`',
    40_000,
    0,
  );
  return { state: view.state as string, exit_code: view.exit_code as number | null, stdout };
}

/** What the host knows of a local sandbox's processes, from its keeper record. */
function sandboxProcesses(sandboxId: string): {
  keeper: number;
  keeperIdentity: ProcIdentity;
  bwrap: number;
  pid1: number;
  namespace: string;
  releaseNamespace: () => void;
  cgroups: string[];
} {
  const rec = JSON.parse(readFileSync(join(stateDir, 'local', sandboxId.replace(/^local:/, ''), 'keeper.json'), 'utf8')) as {
    keeper: ProcIdentity;
    bwrap: { pid: number };
    pid1: { pid: number };
    cgroups: string[];
  };
  // Held until the sandbox is seen gone: once free, its number could name the pid namespace of a
  // sandbox another test file has just made, whose processes would then look left behind.
  const held = holdNamespace(rec.pid1.pid, 'pid');
  onTestFinished(() => held.release());
  return {
    keeper: rec.keeper.pid,
    keeperIdentity: rec.keeper,
    bwrap: rec.bwrap.pid,
    pid1: rec.pid1.pid,
    namespace: held.name,
    releaseNamespace: held.release,
    cgroups: rec.cgroups,
  };
}

/**
 * Kills the task's supervisor, found from the host: by its argv, `… agent.cjs supervise <task dir>`
 * (node's own arguments before it: the agent runtime's loader names node and its libraries first),
 * or, a supervisor the resident hands tasks to (`supervise --warm`), by its working directory,
 * the task's while it supervises it.
 */
function killSupervisor(taskId: string): boolean {
  const taskDirEnd = `/tasks/${taskId}`;
  const cwdOf = (pid: number): string => {
    try {
      return readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      return '';
    }
  };
  const pids = runningWith((argv) => {
    const i = argv.indexOf('supervise');
    return i >= 2 && argv[i - 1]!.endsWith('.cjs');
  }).filter((pid) => cmdline(pid).at(-1)?.endsWith(taskDirEnd) === true || cwdOf(pid).endsWith(taskDirEnd));
  for (const pid of pids) process.kill(pid, 'SIGKILL');
  return pids.length > 0;
}

/** The sandbox's resident agent as its keeper records it (null before it first greeted). */
function residentOf(sandboxId: string): { resident: ProcIdentity | null } | null {
  try {
    return JSON.parse(readFileSync(join(stateDir, 'local', sandboxId.replace(/^local:/, ''), 'resident.json'), 'utf8')) as {
      resident: ProcIdentity | null;
    };
  } catch {
    return null;
  }
}

/** Nothing of a killed sandbox is left: no process in its pid namespace, no keeper, bwrap or nsenter into it, no cgroup, no state directory. */
async function expectNothingLeft(procs: ReturnType<typeof sandboxProcesses>, sandboxId: string, where: string): Promise<void> {
  await waitFor(
    () => runningIn(procs.namespace).length === 0 && ![procs.keeper, procs.bwrap, procs.pid1].some(isRunning),
    `${where} the sandbox's processes to end`,
  );
  const entersSandbox = (argv: string[]) => argv.some((a) => a.endsWith('nsenter')) && argv.includes(String(procs.pid1));
  await waitFor(() => runningWith(entersSandbox).length === 0, `${where} nsenter into the sandbox to end`);
  for (const cgroup of procs.cgroups) expect(existsSync(cgroup), `${where} cgroup left behind`).toBe(false);
  expect(existsSync(join(stateDir, 'local', sandboxId.replace(/^local:/, ''))), `${where} state directory left behind`).toBe(false);
  procs.releaseNamespace();
}

describe('fault injection (kill -9 of server, supervisor, keeper, resident agent during a running task)', () => {
  it(`every task reads its true outcome or unknown, nothing seen is lost, nothing is left behind (seed ${SEED})`, async () => {
    const random = prng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const schedule = FAULTS.flatMap((f) => Array<Fault>(ROUNDS_PER_FAULT).fill(f)).sort(() => random() - 0.5);
    let s = await servers.connect();
    let supervisorKills = 0;
    let residentKills = 0;

    for (const [round, fault] of schedule.entries()) {
      // The target runs 1.25-3.2 s, so a fault up to 0.8 s after its first line mostly lands mid-run.
      const target = lineTask(25 + Math.floor(random() * 16), pick([0.05, 0.065, 0.08]), pick([0, 3]));
      const bystander = lineTask(10 + Math.floor(random() * 10), 0.05, pick([0, 4]));
      const delayMs = Math.floor(random() * 800);
      const midCall = random() < 0.5;
      const where = `[seed ${SEED}, round ${round}: kill -9 ${fault} after ${delayMs} ms${fault === 'server' && midCall ? ' during a get_task wait' : ''}]`;
      try {
        const sandboxId = (await ok(s.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
        const procs = sandboxProcesses(sandboxId);
        if (fault === 'resident') {
          // The resident runs the target itself (a call waiting on it, far from its background_after)
          // beside a task it handed to a supervisor; it is killed mid-call.
          const bystanderTask = await ok(s.client, 'start_task', { sandbox_id: sandboxId, command: bystander.command, timeout: 120 });
          const resident = await waitFor(() => residentOf(sandboxId)?.resident, 'the resident to run');
          const call = ok(s.client, 'run_command', { sandbox_id: sandboxId, command: target.command, timeout: 120, background_after: 60 });
          await new Promise((r) => setTimeout(r, delayMs));
          if (isProcAlive(resident)) {
            process.kill(resident.pid, 'SIGKILL');
            residentKills++;
          }
          expect(await call, `${where} the call's answer`).toMatchObject({
            exit_code: target.exitCode,
            stdout: target.stdout,
            timed_out: false,
          });
          const end = await readToEnd(s, { sandbox_id: sandboxId, task_id: bystanderTask.task_id as string });
          expect(end, `${where} the bystander task`).toEqual({
            state: bystander.state,
            exit_code: bystander.exitCode,
            stdout: bystander.stdout,
          });
          await ok(s.client, 'kill_sandbox', { sandbox_id: sandboxId });
          await expectNothingLeft(procs, sandboxId, where);
          continue;
        }
        const tasks: [Handle, ReturnType<typeof lineTask>][] = [];
        for (const spec of [target, bystander]) {
          const started = await ok(s.client, 'start_task', { sandbox_id: sandboxId, command: spec.command, timeout: 120 });
          tasks.push([{ sandbox_id: sandboxId, task_id: started.task_id as string }, spec]);
        }
        const [targetHandle] = tasks[0]!;
        await waitFor(async () => (await ok(s.client, 'get_task', { ...targetHandle, wait: 5 })).stdout !== '', 'the first output');
        await new Promise((r) => setTimeout(r, delayMs));
        // What a reader saw before the fault: it must survive it.
        const seen = new Map<string, string>();
        for (const [handle] of tasks)
          seen.set(handle.task_id, (await ok(s.client, 'get_task', { ...handle, limit: 65536 })).stdout as string);

        if (fault === 'server') {
          const pid = s.transport.pid!;
          const inFlight = midCall
            ? s.client.callTool({ name: 'get_task', arguments: { ...targetHandle, stdout_offset: 0, wait: 30 } })
            : undefined;
          process.kill(pid, 'SIGKILL');
          await inFlight?.catch(() => undefined);
          await waitFor(() => !isRunning(pid), 'the killed server to exit');
          s = await servers.connect();
        } else if (fault === 'supervisor') {
          // The task may already have ended: then there is nothing to kill, and its outcome is final.
          if (killSupervisor(targetHandle.task_id)) supervisorKills++;
        } else {
          // The recorded pid is signalled only while it is still that keeper (same start time): a
          // keeper dead already could have left its pid to another test's process.
          expect(isProcAlive(procs.keeperIdentity), `${where} the keeper to be alive before its kill`).toBe(true);
          process.kill(procs.keeper, 'SIGKILL');
          await waitFor(() => !isRunning(procs.keeper), 'the killed keeper to exit');
        }

        if (fault === 'keeper') {
          // The sandbox died with its keeper, and its tasks with it: gone, never a success.
          for (const [handle] of tasks) expect((await toolError(s.client, 'get_task', handle)).category, where).toBe('not_found');
          // Nothing left to destroy: kill_sandbox (idempotent) says so.
          expect(await ok(s.client, 'kill_sandbox', { sandbox_id: sandboxId }), where).toMatchObject({ destroyed: false });
        } else {
          for (const [index, [handle, spec]] of tasks.entries()) {
            const end = await readToEnd(s, handle);
            expect(end.stdout.startsWith(seen.get(handle.task_id)!), `${where} task ${index}: output seen before the fault was lost`).toBe(
              true,
            );
            const mayBeUnknown = fault === 'supervisor' && index === 0;
            if (mayBeUnknown && end.state === 'unknown') {
              expect(spec.stdout.startsWith(end.stdout), `${where} unknown task kept bytes it never printed`).toBe(true);
            } else {
              expect(end, `${where} task ${index} must read its true outcome`).toEqual({
                state: spec.state,
                exit_code: spec.exitCode,
                stdout: spec.stdout,
              });
            }
          }
          await ok(s.client, 'kill_sandbox', { sandbox_id: sandboxId });
        }

        await expectNothingLeft(procs, sandboxId, where);
      } catch (e) {
        if (e instanceof Error && !e.message.includes(`seed ${SEED}`)) e.message = `${where} ${e.message}`;
        throw e;
      }
    }
    // Guards the suite itself: had every task ended before its fault, nothing would have been tested.
    expect(supervisorKills, `[seed ${SEED}] no supervisor was killed while running`).toBeGreaterThan(0);
    expect(residentKills, `[seed ${SEED}] no resident was killed`).toBeGreaterThan(0);
    // Nine rounds of real sandboxes and tasks: 38 s on this machine with two busy loops besides.
  }, 240_000);
});
