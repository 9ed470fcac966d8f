// Runs the BUILT agent (dist/agent.cjs) as a separate process per call, the way the host does,
// with a clean environment and a temporary state directory.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach } from 'vitest';
import {
  encodeRequest,
  ResponseSchema,
  TaskViewSchema,
  type AgentRequestInput,
  type AgentResponse,
  type TaskView,
} from '../../shared/protocol.js';
import { getRequest, startRequest, type StartFields } from './agent-requests.js';
import { AGENT_BUNDLE } from './paths.js';
import { allPids, startTimeOf } from './processes.js';
import { sleep, waitFor } from './wait.js';

// Kept here for the tests that import it from the world, as before it moved to agent-requests.ts.
export { newTaskId } from './agent-requests.js';

/** One temporary agent world: its state dir, a HOME, and the extra env for its agent calls. */
export interface AgentWorld {
  stateDir: string;
  home: string;
  env: Record<string, string>;
}

/**
 * Bounds on waits that end as soon as their event happens: generous, so a loaded machine never
 * turns a slow supervisor into a failed test. A test of the bound itself sets its own value.
 */
export const GENEROUS_WAITS: Record<string, string> = {
  // cancel: how long to wait for the supervisor to confirm a terminal state.
  SANDBOX_AGENT_CANCEL_CONFIRM_MS: '30000',
  // input: how long to wait for room in the pipe, and for the supervisor to confirm `eof`.
  SANDBOX_AGENT_INPUT_WAIT_MS: '30000',
  // start: how long to wait for the new supervisor's first status. Past it, start answers `unknown`
  // (no_status), and a test that then reads the status, or waits for a terminal state, fails.
  SANDBOX_AGENT_START_REPORT_MS: '30000',
};

/** Creates a fresh state directory and HOME; `env` adds variables (e.g. secrets, timings) over GENEROUS_WAITS. */
export function newWorld(env: Record<string, string> = {}): AgentWorld {
  const base = mkdtempSync(join(tmpdir(), 'agent-test-'));
  const home = join(base, 'home');
  mkdirSync(home);
  return { stateDir: join(base, 'state'), home, env: { ...GENEROUS_WAITS, ...env } };
}

/**
 * The clean environment an agent call gets: PATH, HOME, the state dir, the world's extras and
 * `extra`. A command given it is the world's: destroyWorld finds its processes by it.
 */
export function agentEnv(world: AgentWorld, extra: Record<string, string> = {}): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: world.home, SANDBOX_AGENT_STATE_DIR: world.stateDir, ...world.env, ...extra };
}

export interface RawResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs `node dist/agent.cjs <args>` and collects its output. With `stdin`, the process reads those
 * bytes and then end-of-file (how the host sends `input` data); without, its stdin is left open.
 */
export function runAgent(world: AgentWorld, args: string[], extraEnv: Record<string, string> = {}, stdin?: Buffer): Promise<RawResult> {
  return new Promise((resolvePromise) => {
    const child = execFile(
      process.execPath,
      [AGENT_BUNDLE, ...args],
      { env: agentEnv(world, extraEnv), timeout: 60_000, maxBuffer: 8 << 20 },
      (err, stdout, stderr) => {
        const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : -1) : 0;
        resolvePromise({ exitCode: code, stdout, stderr });
      },
    );
    if (stdin) {
      child.stdin?.on('error', () => {}); // an agent that answered without reading (a refusal) closes it early
      child.stdin?.end(stdin);
    }
  });
}

/** Sends one raw (already encoded) argument; asserts the one-JSON-line contract and exit 0. */
export async function callRaw(
  world: AgentWorld,
  arg: string,
  extraEnv: Record<string, string> = {},
  stdin?: Buffer,
): Promise<AgentResponse> {
  const res = await runAgent(world, ['call', arg], extraEnv, stdin);
  if (res.exitCode !== 0) throw new Error(`agent exited ${res.exitCode}: ${res.stderr}`);
  const lines = res.stdout.split('\n');
  if (lines.length !== 2 || lines[1] !== '') throw new Error(`expected exactly one line, got ${JSON.stringify(res.stdout)}`);
  return ResponseSchema.parse(JSON.parse(lines[0]!));
}

/** Sends one request; returns the parsed response. */
export function call(
  world: AgentWorld,
  request: AgentRequestInput | Record<string, unknown>,
  extraEnv: Record<string, string> = {},
  stdin?: Buffer,
): Promise<AgentResponse> {
  return callRaw(world, encodeRequest(request as AgentRequestInput), extraEnv, stdin);
}

/** The result of an answer that must be ok: an error answer throws, naming its code and message. */
export function resultOf(res: AgentResponse): unknown {
  if (!res.ok) throw new Error(`agent answered ${res.error.code}: ${res.error.message}`);
  return res.result;
}

/** Sends a start/get/cancel request and returns its validated task view (fails on ok:false). */
export async function callView(world: AgentWorld, request: AgentRequestInput, extraEnv: Record<string, string> = {}): Promise<TaskView> {
  return TaskViewSchema.parse(resultOf(await call(world, request, extraEnv)));
}

/** Starts `command` as a fresh task (unless `fields` name its id) and returns its task view. */
export function startTask(world: AgentWorld, command: string, fields: StartFields = {}): Promise<TaskView> {
  return callView(world, startRequest(command, fields));
}

export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'timed_out']);

/** Long-polls get (fresh agent process per call) until the task is terminal; returns the last view. */
export async function waitTerminal(world: AgentWorld, taskId: string, boundMs = 30_000): Promise<TaskView> {
  const until = Date.now() + boundMs;
  for (;;) {
    const view = await callView(world, getRequest(taskId, { stdout_offset: 0, stderr_offset: 0, wait_s: 0 }));
    if (TERMINAL.has(view.state) || view.state === 'unknown') return view;
    if (Date.now() > until) throw new Error(`task ${taskId} still ${view.state} after ${boundMs} ms`);
    await sleep(50);
  }
}

/** The task directory of a world. */
export const taskDirOf = (world: AgentWorld, taskId: string) => join(world.stateDir, 'tasks', taskId);

/** The task's status file as JSON (throws if absent). */
export function readStatusJson(
  world: AgentWorld,
  taskId: string,
): { supervisor: { pid: number } | null; group: { pgid: number } | null; state: string } {
  return JSON.parse(readFileSync(join(taskDirOf(world, taskId), 'status.json'), 'utf8'));
}

/**
 * The task's status once its supervisor has recorded the command's group. start may answer before
 * the supervisor's first write (it reports `running` after a short wait), so a test that signals the
 * supervisor or the group reads the status through this, not straight after start.
 */
export function statusWithGroup(world: AgentWorld, taskId: string): Promise<ReturnType<typeof readStatusJson>> {
  return waitFor(() => {
    try {
      const status = readStatusJson(world, taskId);
      return status.group !== null && status.supervisor !== null ? status : null;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
  }, `task ${taskId}'s status to name its group`);
}

/** Processes a test started outside any world (bystanders), each named by pid and start time. */
export interface Strays {
  /** Records live processes to kill after the test; one already gone is left out. */
  push(...pids: number[]): void;
}

/**
 * A per-test factory of worlds, all destroyed after each test (with any stray processes a test
 * records), so a failing test never leaves processes behind.
 */
export function worldsPerTest(): { world: (env?: Record<string, string>) => AgentWorld; strays: Strays } {
  const worlds: AgentWorld[] = [];
  const recorded: ProcessRef[] = [];
  afterEach(() => {
    for (const w of worlds.splice(0)) destroyWorld(w);
    for (const ref of recorded.splice(0)) killIfSame(ref);
  });
  return {
    world: (env = {}) => {
      const w = newWorld(env);
      worlds.push(w);
      return w;
    },
    strays: {
      push: (...pids) => {
        for (const pid of pids) {
          const startTime = startTimeOrNull(pid);
          if (startTime !== null) recorded.push({ pid, startTime });
        }
      },
    },
  };
}

/**
 * Kills every process of the world, then removes it. A world's processes (agent calls, supervisors,
 * commands, whatever those started, even in a session of their own) are told apart by the state
 * directory in their environment, unique per world: a pid recorded in a status file may have ended
 * long ago and been reused by a process of a test running in parallel.
 */
export function destroyWorld(world: AgentWorld): void {
  const marker = `\0SANDBOX_AGENT_STATE_DIR=${world.stateDir}\0`;
  // Again while any is left: a supervisor may have been starting its command meanwhile.
  for (let pass = 0; pass < 5; pass++) {
    const found = allPids().filter((pid) => pid !== process.pid && environOf(pid).includes(marker));
    if (found.length === 0) break;
    for (const pid of found) tryKill(pid);
  }
  rmSync(dirname(world.stateDir), { recursive: true, force: true });
}

interface ProcessRef {
  pid: number;
  startTime: number;
}

/** The process's environment, NUL-delimited on both sides ('' when gone, a zombie, or unreadable). */
function environOf(pid: number): string {
  try {
    return `\0${readFileSync(`/proc/${pid}/environ`, 'latin1')}`;
  } catch {
    return '';
  }
}

function startTimeOrNull(pid: number): number | null {
  try {
    return startTimeOf(pid);
  } catch {
    return null;
  }
}

/** SIGKILL, only to the very process recorded: a pid that ended may now name another test's process. */
function killIfSame(ref: ProcessRef): void {
  if (startTimeOrNull(ref.pid) === ref.startTime) tryKill(ref.pid);
}

function tryKill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}
