// Stopping tasks: cancel (TERM, then KILL, to the whole group), timeouts, a supervisor killed
// with -9, the saved outcome of a finished task, and status files read during transitions.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { TaskStatusSchema } from '../../shared/status.js';
import { cancelRequest, getRequest, newTaskId } from '../support/agent-requests.js';
import { type AgentWorld, callView, readStatusJson, startTask, taskDirOf, waitTerminal, worldsPerTest } from '../support/agent-world.js';
import { fixture } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { isRunning, pgidOf, startTimeOf } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

beforeAll(() => requireBuild());

const { world, strays } = worldsPerTest();
const cancel = (w: AgentWorld, id: string) => callView(w, cancelRequest(id));

/** Waits until the task's stdout contains `text`; returns the stdout so far. */
const waitOutput = (w: AgentWorld, id: string, text: string) =>
  waitFor(async () => {
    const v = await callView(w, getRequest(id, { wait_s: 2 }));
    return v.stdout.includes(text) ? v.stdout : null;
  }, `output ${text}`);

describe('cancel', () => {
  it('stops the whole process group, children included', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, fixture('children.sh'));
    const out = await waitOutput(w, id, 'ready');
    const children = [...out.matchAll(/child (\d+)/g)].map((m) => Number(m[1]));
    expect(children).toHaveLength(2);
    const pgid = readStatusJson(w, id).group!.pgid;
    for (const pid of children) expect(pgidOf(pid)).toBe(pgid);

    const view = await cancel(w, id);
    expect(view.state).toBe('cancelled');
    expect(view.finished_at).toEqual(expect.any(Number));
    expect(view.stdout).toContain('ready');
    await waitFor(() => children.every((p) => !isRunning(p)) && !isRunning(pgid), 'the group to be gone');
  });

  it('escalates to KILL for a command that ignores TERM', async () => {
    const w = world({ SANDBOX_AGENT_GRACE_MS: '300' });
    const { task_id: id } = await startTask(w, fixture('ignore-sigterm.sh'));
    await waitOutput(w, id, 'ready');
    const pgid = readStatusJson(w, id).group!.pgid;
    expect(await cancel(w, id)).toMatchObject({ state: 'cancelled', exit_code: 137 });
    await waitFor(() => !isRunning(pgid), 'the leader to die');
  });

  it('cannot stop a child that made its own session (documented escape)', async () => {
    const w = world({ SANDBOX_AGENT_DRAIN_MS: '200' });
    const pidFile = join(w.home, 'escaped.pid');
    const { task_id: id } = await startTask(w, `setsid bash -c 'echo $$ > ${pidFile}; exec sleep 300' & sleep 300`);
    const escaped = await waitFor(() => {
      try {
        return Number(readFileSync(pidFile, 'utf8')) || null;
      } catch {
        return null;
      }
    }, 'the escaped pid');
    strays.push(escaped);
    const pgid = readStatusJson(w, id).group!.pgid;
    expect(pgidOf(escaped)).not.toBe(pgid);

    // It even holds the task's stdout open; the supervisor stops waiting for it after the drain bound.
    expect(await cancel(w, id)).toMatchObject({ state: 'cancelled' });
    expect(isRunning(pgid)).toBe(false);
    expect(isRunning(escaped)).toBe(true);
  });

  it('returns the saved outcome of a finished task and signals nothing', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, fixture('exit-n.sh', '3'));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'failed', exit_code: 3 });
    const statusPath = join(taskDirOf(w, id), 'status.json');
    const before = { text: readFileSync(statusPath, 'utf8'), mtime: statSync(statusPath).mtimeMs };
    for (let i = 0; i < 2; i++) {
      expect(await cancel(w, id)).toMatchObject({ state: 'failed', exit_code: 3, stdout: 'exiting with 3\n' });
    }
    expect({ text: readFileSync(statusPath, 'utf8'), mtime: statSync(statusPath).mtimeMs }).toEqual(before);
  });

  it('returns not-confirmed honestly when the cancel window is shorter than the stop', async () => {
    // The stop (TERM ignored, KILL after the grace) outlasts the window many times over, so a cancel
    // call that a loaded machine stalls still looks before the KILL.
    const w = world({ SANDBOX_AGENT_GRACE_MS: '5000', SANDBOX_AGENT_CANCEL_CONFIRM_MS: '200' });
    const { task_id: id } = await startTask(w, fixture('ignore-sigterm.sh'));
    await waitOutput(w, id, 'ready');
    const view = await cancel(w, id);
    expect(view).toMatchObject({ state: 'running', error: { code: 'cancel_unconfirmed' } });
    // The supervisor finishes the job on its own.
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'cancelled' });
  });
});

describe('timeout', () => {
  it('stops the group and records timed_out', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'echo started; sleep 300', { timeout_s: 1 });
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'timed_out', stdout: 'started\n' });
    expect(view.exit_code).toBe(143);
    expect(isRunning(readStatusJson(w, id).group!.pgid)).toBe(false);
  });

  it('kills a command that ignores TERM after the grace period', async () => {
    const w = world({ SANDBOX_AGENT_GRACE_MS: '300' });
    const { task_id: id } = await startTask(w, fixture('ignore-sigterm.sh'), { timeout_s: 1 });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'timed_out', exit_code: 137 });
  });
});

describe('a lost supervisor', () => {
  it('reads as unknown after kill -9, and cancel then stops the verified group itself', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, fixture('forever.sh'));
    await waitOutput(w, id, 'ready');
    const status = readStatusJson(w, id);
    process.kill(status.supervisor!.pid, 'SIGKILL');
    await waitFor(() => !isRunning(status.supervisor!.pid), 'the supervisor to die');

    const view = await callView(w, getRequest(id));
    expect(view).toMatchObject({ state: 'unknown', stdout: 'ready\n', error: { code: 'supervisor_missing' } });
    expect(isRunning(status.group!.pgid)).toBe(true);

    const cancelled = await cancel(w, id);
    expect(cancelled).toMatchObject({ state: 'unknown', error: { code: 'supervisor_missing' } });
    await waitFor(() => !isRunning(status.group!.pgid), 'the orphaned group to be stopped');
  });
});

describe('unverified processes', () => {
  it('never signals a recorded pid whose start time does not match (a reused pid)', async () => {
    const w = world();
    // A live bystander in its own process group stands in for a process that reused the pids.
    const bystander = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    strays.push(bystander.pid!);
    const real = startTimeOf(bystander.pid!);
    const id = newTaskId();
    const dir = taskDirOf(w, id);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const status = {
      format: 1,
      task_id: id,
      state: 'running',
      reason: null,
      supervisor: { pid: bystander.pid, start_time: real - 1 },
      group: { pgid: bystander.pid, leader_start_time: real + 1 },
      exit_code: null,
      signal: null,
      started_at: 1,
      finished_at: null,
      stdout_truncated: false,
      stderr_truncated: false,
    };
    writeFileSync(join(dir, 'status.json'), JSON.stringify(status));

    expect(await callView(w, getRequest(id))).toMatchObject({
      state: 'unknown',
      error: { code: 'supervisor_missing' },
    });
    expect(await cancel(w, id)).toMatchObject({ state: 'unknown' });
    expect(isRunning(bystander.pid!)).toBe(true);
    expect(readStatusJson(w, id).state).toBe('running');
  });

  it('reads a status of another format, or a damaged one, as unknown and signals nothing', async () => {
    const w = world();
    const bystander = spawn('sleep', ['300'], { detached: true, stdio: 'ignore' });
    strays.push(bystander.pid!);
    const real = startTimeOf(bystander.pid!);
    for (const [text, code] of [
      [JSON.stringify({ format: 2, state: 'running', supervisor: { pid: bystander.pid, start_time: real } }), 'invalid_status'],
      ['{"format":1,"state":"runn', 'invalid_status'],
    ] as const) {
      const id = newTaskId();
      mkdirSync(taskDirOf(w, id), { recursive: true, mode: 0o700 });
      writeFileSync(join(taskDirOf(w, id), 'status.json'), text);
      expect(await callView(w, getRequest(id))).toMatchObject({ state: 'unknown', error: { code } });
      expect(await cancel(w, id)).toMatchObject({ state: 'unknown', error: { code } });
    }
    expect(isRunning(bystander.pid!)).toBe(true);
  });
});

describe('status file', () => {
  it('always parses for a reader hammering it through every transition', async () => {
    // No race against a grace period: the task answers TERM only once the reader has seen the
    // `running:cancel` record and says so with a file (the KILL after the grace never comes).
    const w = world({ SANDBOX_AGENT_GRACE_MS: '120000' });
    const id = newTaskId();
    const path = join(taskDirOf(w, id), 'status.json');
    const seen = join(w.home, 'reader-saw-cancel');
    // A separate process, so that its tight loop does not stall the agent calls.
    const reader = spawn(
      process.execPath,
      [
        '-e',
        `const fs = require('fs'); let reads = 0, bad = 0, states = new Set(); const until = Date.now() + 60000;
         fs.writeSync(1, 'reading\\n');
         while (Date.now() < until) {
           let text; try { text = fs.readFileSync(process.argv[1], 'utf8'); } catch { continue; }
           reads++;
           try {
             const s = JSON.parse(text);
             states.add(s.state + ':' + s.reason);
             if (s.state === 'running' && s.reason === 'cancel' && !fs.existsSync(process.argv[2])) fs.writeFileSync(process.argv[2], '');
             if (s.state !== 'running') break;
           } catch { bad++; }
         }
         console.log(JSON.stringify({ reads, bad, states: [...states] }));`,
        path,
        seen,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    reader.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const readerDone = new Promise((resolve) => reader.on('exit', resolve));
    // It must be reading before the task starts, or it could miss the first record.
    await waitFor(() => out.startsWith('reading\n'), 'the reader to start');

    const command = `trap 'until [ -e ${seen} ]; do sleep 0.05; done; exit 0' TERM; echo ready; while :; do sleep 0.05; done`;
    await startTask(w, command, { task_id: id });
    await waitOutput(w, id, 'ready');
    expect(await cancel(w, id)).toMatchObject({ state: 'cancelled' });
    await readerDone;
    const report = JSON.parse(out.slice('reading\n'.length)) as { reads: number; bad: number; states: string[] };
    expect(report.bad).toBe(0);
    expect(report.reads).toBeGreaterThan(100);
    expect(report.states).toEqual(['running:null', 'running:cancel', 'cancelled:cancel']);
    // And the final record matches the shared schema.
    expect(TaskStatusSchema.safeParse(JSON.parse(readFileSync(path, 'utf8'))).success).toBe(true);
  });
});
