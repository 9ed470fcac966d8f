// A start's wait for its supervisor's first report, for both kinds of supervisor: a reused one
// that tells its status writes on its pipe (`running`, then `free`), and a cold one followed
// through the task directory. The test plays the supervisor behind start's own launcher hook,
// taking each step when it chooses (as session-policy.test.ts holds provider calls open), so that
// what start answers at each point is pinned, spawn failures included. The real supervisors run
// in resident.test.ts and tasks.test.ts.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  killIfStuckStarting,
  newSupervisorWatch,
  startNewTask,
  startTask,
  supervisorGone,
  type StartOpts,
  type SupervisorLauncher,
  type SupervisorWatch,
} from '../../agent/ops/start.js';
import { readProcStat } from '../../agent/proc.js';
import { writeStatus } from '../../agent/status-file.js';
import { WarmSupervisor } from '../../agent/warm-supervisor.js';
import { DEFAULT_TIMINGS, type Timings } from '../../agent/timing.js';
import { initialStatus, type TaskStatus } from '../../shared/status.js';
import { newTaskId } from '../support/agent-world.js';
import { scratchDir } from '../support/scratch.js';

/** Windows no test waits out: only the supervisor's word (or its status) ends a wait. */
const LONG: Timings = { ...DEFAULT_TIMINGS, startReportMs: 60_000, startSettleMs: 60_000 };

let home: string;
beforeEach(() => {
  // start finds its tasks folder through the environment, as the agent's own process does.
  home = scratchDir('start-wait-');
  process.env.SANDBOX_AGENT_STATE_DIR = join(home, 'state');
});

const optsOf = (taskId: string): StartOpts => ({ taskId, command: 'true', cwd: home, timeoutS: 60, stdin: false });

/** A supervisor the test plays: launched as a reused one (`isTelling`) or a cold one. */
function played(isTelling: boolean, onLaunch: (watch: SupervisorWatch) => void = () => {}) {
  let resolve: (launched: { dir: string; watch: SupervisorWatch }) => void = () => {};
  const launched = new Promise<{ dir: string; watch: SupervisorWatch }>((r) => (resolve = r));
  const launch: SupervisorLauncher = (dir) => {
    const watch = newSupervisorWatch(isTelling);
    onLaunch(watch);
    resolve({ dir, watch });
    return watch;
  };
  return { launch, launched };
}

/** What a reused supervisor's `running` line does (warm-supervisor.ts). */
function sayRunning(watch: SupervisorWatch): void {
  watch.hasReported = true;
  watch.told?.notify();
}

const self = readProcStat(process.pid)!;
const running = (taskId: string): TaskStatus => ({
  ...initialStatus(taskId),
  supervisor: { pid: process.pid, start_time: self.startTime },
  started_at: Math.floor(Date.now() / 1000),
});
const succeeded = (taskId: string): TaskStatus => ({
  ...running(taskId),
  state: 'succeeded',
  reason: 'exit',
  exit_code: 0,
  finished_at: Math.floor(Date.now() / 1000),
});
const statusFile = (dir: string) => JSON.parse(readFileSync(join(dir, 'status.json'), 'utf8')) as TaskStatus;
const tick = () => new Promise((r) => setImmediate(r));

/** Starts a new task under a supervisor the test plays; resolves once it is launched. */
async function startPlayed(isTelling: boolean, timings = LONG, onLaunch?: (watch: SupervisorWatch) => void) {
  const id = newTaskId();
  const sup = played(isTelling, onLaunch);
  const started = startNewTask(optsOf(id), timings, sup.launch).then((task) => task!.observed);
  return { id, started, ...(await sup.launched) };
}

describe('a reused supervisor (its word on its pipe)', () => {
  it('`running`, then `free` within the settle window: start answers the ended task', async () => {
    const { id, dir, watch, started } = await startPlayed(true);
    writeStatus(dir, running(id));
    sayRunning(watch);
    await tick();
    writeStatus(dir, succeeded(id));
    supervisorGone(watch);
    expect(await started).toMatchObject({ state: 'succeeded', status: { exit_code: 0 } });
  });

  it('`running` and no more: once the settle window passes, the task as observed (running)', async () => {
    const { id, dir, watch, started } = await startPlayed(true, { ...LONG, startSettleMs: 50 });
    writeStatus(dir, running(id));
    sayRunning(watch);
    expect(await started).toMatchObject({ state: 'running' });
  });

  it('no word within startReportMs, its hand-over failed: recorded as failed to start', async () => {
    const timings = { ...LONG, startReportMs: 0, startSettleMs: 0 };
    const { dir, started } = await startPlayed(true, timings, (watch) => (watch.spawnError = 'EPIPE'));
    expect(await started).toMatchObject({ state: 'failed', status: { error: { code: 'spawn_failed' } } });
    expect(statusFile(dir)).toMatchObject({ error: { code: 'spawn_failed' } });
  });
});

describe('a cold supervisor (followed through the task directory)', () => {
  it('its first status, then its final one within the settle window: start answers the ended task', async () => {
    const { id, dir, started } = await startPlayed(false);
    writeStatus(dir, running(id));
    await tick();
    writeStatus(dir, succeeded(id));
    expect(await started).toMatchObject({ state: 'succeeded', status: { exit_code: 0 } });
  });
});

describe('either kind, gone before its first status', () => {
  for (const [kind, isTelling] of [
    ['a reused supervisor', true],
    ['a cold supervisor', false],
  ] as const) {
    it(`${kind} that could not be spawned or handed its task: the task is recorded as failed to start, naming the error`, async () => {
      const { dir, watch, started } = await startPlayed(isTelling);
      watch.spawnError = 'EPIPE';
      supervisorGone(watch);
      const failed = {
        state: 'failed',
        reason: 'supervisor_error',
        error: { code: 'spawn_failed', message: expect.stringContaining('EPIPE') },
      };
      expect(await started).toMatchObject({ state: 'failed', status: failed });
      expect(statusFile(dir)).toMatchObject(failed);
    });

    it(`${kind} gone without a status (killed): unknown, and nothing is written`, async () => {
      const { dir, watch, started } = await startPlayed(isTelling);
      supervisorGone(watch);
      expect(await started).toMatchObject({ state: 'unknown', error: { code: 'no_status' } });
      expect(existsSync(join(dir, 'status.json'))).toBe(false);
    });
  }
});

describe('no process or memory for the supervisor or its command (EAGAIN, ENOMEM)', () => {
  // Near a process limit these once read as a task that ended with no exit code (a run_command's
  // `exit_code: null`); now the start fails saying so, and the task (whose id nobody was told) goes.
  for (const [kind, isTelling] of [
    ['a reused supervisor', true],
    ['a cold supervisor', false],
  ] as const) {
    for (const errno of ['EAGAIN', 'ENOMEM']) {
      it(`${kind} that could not be spawned (${errno}): the start answers out_of_processes, and no task is left`, async () => {
        const { dir, watch, started } = await startPlayed(isTelling);
        watch.spawnError = errno;
        supervisorGone(watch);
        await expect(started).rejects.toMatchObject({ code: 'out_of_processes', message: expect.stringContaining(errno) });
        expect(existsSync(dir)).toBe(false);
      });
    }

    it(`${kind} whose command could not be spawned (EAGAIN): the start answers out_of_processes, and no task is left`, async () => {
      const { id, dir, watch, started } = await startPlayed(isTelling);
      const message = 'the command could not be started (EAGAIN)';
      writeStatus(dir, { ...initialStatus(id), state: 'failed', reason: 'supervisor_error', error: { code: 'out_of_processes', message } });
      supervisorGone(watch);
      await expect(started).rejects.toMatchObject({ code: 'out_of_processes', message });
      expect(existsSync(dir)).toBe(false);
    });
  }

  it('any other spawn error (EPIPE) is still a task recorded as failed to start', async () => {
    const { dir, watch, started } = await startPlayed(false);
    watch.spawnError = 'EPIPE';
    supervisorGone(watch);
    expect(await started).toMatchObject({ state: 'failed', error: { code: 'spawn_failed' } });
    expect(existsSync(dir)).toBe(true);
  });
});

describe('a supervisor stuck in its start (killIfStuckStarting)', () => {
  // A node that could not create its platform threads waits forever with 2 threads and runs no
  // code. Played by real processes: `sleep` has one thread and never gets more; a node has its
  // platform's threads within milliseconds.
  it('one that stays below the threads of a started node is killed after about 3 s, onStuck first', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    let stuckSeenAlive = false;
    killIfStuckStarting(child, () => (stuckSeenAlive = child.exitCode === null && child.signalCode === null));
    const [, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect(signal).toBe('SIGKILL');
    expect(stuckSeenAlive).toBe(true);
  }, 10_000);

  it('one below those threads that spends CPU (a start merely slow on a busy machine) is left alone', async () => {
    // One thread, busy for 4.5 s (a bound: it ends by itself), where a stuck node waits in a futex.
    const busy = 'import time\nt = time.time() + 4.5\nwhile time.time() < t: pass';
    const child = spawn('python3', ['-c', busy], { stdio: 'ignore' });
    let isStuck = false;
    killIfStuckStarting(child, () => (isStuck = true));
    const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
    expect({ code, signal, isStuck }).toEqual({ code: 0, signal: null, isStuck: false });
  }, 10_000);

  it('a node that has started is left alone', async () => {
    const child = spawn(process.execPath, ['--v8-pool-size=1', '-e', 'setTimeout(() => {}, 4500)'], { stdio: 'ignore' });
    let isStuck = false;
    killIfStuckStarting(child, () => (isStuck = true));
    const [code] = (await once(child, 'exit')) as [number | null, string | null];
    expect(code).toBe(0);
    expect(isStuck).toBe(false);
  }, 10_000);
});

describe('a start of a task that exists', () => {
  it('waits for a young directory to report (a start in progress), then answers its task', async () => {
    const id = newTaskId();
    const first = played(false);
    // A first start that gave up on its supervisor at once: the directory is there, no status yet.
    const firstStart = await startNewTask(optsOf(id), { ...LONG, startReportMs: 0, startSettleMs: 0 }, first.launch);
    expect(firstStart!.observed).toMatchObject({ state: 'unknown', error: { code: 'no_status' } });
    const { dir } = await first.launched;
    const launchAgain: SupervisorLauncher = () => {
      throw new Error('a task that exists is started again');
    };
    const again = startTask(optsOf(id), LONG, launchAgain);
    await tick();
    writeStatus(dir, running(id));
    expect(await again).toMatchObject({ task_id: id, state: 'running' });
  });
});

describe('a supervisor the resident boots for the start, which cannot be spawned', () => {
  it('records the task as failed to start, naming the error, as a cold spawn does', async () => {
    const id = newTaskId();
    const noColdStart: SupervisorLauncher = () => {
      throw new Error('started the cold way');
    };
    const warm = new WarmSupervisor(noColdStart, 60_000, 0);
    // The resident's node is gone: a real spawn's ENOENT, which only the child's `error` event tells.
    const node = process.execPath;
    process.execPath = join(home, 'no-node');
    try {
      const view = await startTask(optsOf(id), LONG, warm.launch);
      expect(view).toMatchObject({ state: 'failed', error: { code: 'spawn_failed', message: expect.stringContaining('ENOENT') } });
    } finally {
      process.execPath = node;
      warm.retire();
    }
  });
});
