// A task's stdin: held open by the supervisor unless `stdin: false`, fed by `input` from separate
// agent processes (as a restarted host would), closed by `eof`; every refusal names its reason.
import { execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { deliverInput } from '../../agent/ops/input.js';
import { readProcStat } from '../../agent/proc.js';
import { DEFAULT_TIMINGS } from '../../agent/timing.js';
import { InputResultSchema, type AgentResponse, type InputResult } from '../../shared/protocol.js';
import type { TaskStatus } from '../../shared/status.js';
import { cancelRequest, getRequest, inputRequest } from '../support/agent-requests.js';
import {
  agentEnv,
  type AgentWorld,
  call,
  callView,
  GENEROUS_WAITS,
  newTaskId,
  startTask,
  statusWithGroup,
  taskDirOf,
  waitTerminal,
  worldsPerTest,
} from '../support/agent-world.js';
import { AGENT_BUNDLE } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

beforeAll(() => requireBuild());

const { world, strays } = worldsPerTest();

const input = (w: AgentWorld, taskId: string, data: string, eof?: boolean, extraEnv: Record<string, string> = {}): Promise<AgentResponse> =>
  call(w, inputRequest(taskId, data, eof === undefined ? {} : { eof }), extraEnv);

async function inputOk(
  w: AgentWorld,
  taskId: string,
  data: string,
  eof?: boolean,
  extraEnv: Record<string, string> = {},
): Promise<InputResult> {
  const res = await input(w, taskId, data, eof, extraEnv);
  if (!res.ok) throw new Error(`input answered ${res.error.code}: ${res.error.message}`);
  return InputResultSchema.parse(res.result);
}

async function inputError(w: AgentWorld, taskId: string, data: string, eof?: boolean) {
  const res = await input(w, taskId, data, eof);
  if (res.ok) throw new Error('expected ok:false');
  return res.error;
}

describe('stdin held open', () => {
  it('makes `read` wait until input arrives from a separate agent process, then the task succeeds', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'read x; echo "got:$x"');
    // Waiting, not at EOF: still running after a long-poll that would have seen it end.
    expect(await callView(w, getRequest(id, { wait_s: 1 }))).toMatchObject({ state: 'running', stdout: '' });
    expect(await inputOk(w, id, 'hello\n')).toEqual({ task_id: id, bytes_written: 6, stdin_closed: false });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'got:hello\n' });
  });

  it('ends `cat` after input with eof, keeping everything written before it', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'cat');
    expect(await inputOk(w, id, 'abc ')).toMatchObject({ bytes_written: 4, stdin_closed: false });
    expect(await inputOk(w, id, 'héllo', true)).toEqual({ task_id: id, bytes_written: 6, stdin_closed: true });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: 'abc héllo' });
  });

  it('passes stdin on to the commands the shell runs (a pipeline reads it)', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'tr a-z A-Z | head -c 5');
    await inputOk(w, id, 'shout and more', true);
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: 'SHOUT' });
  });

  it('keeps the old behaviour with stdin: false (/dev/null: `cat` ends at once) and refuses input saying so', async () => {
    const w = world();
    const { task_id: catId } = await startTask(w, 'cat; echo "cat ended"', { stdin: false });
    expect(await waitTerminal(w, catId)).toMatchObject({ state: 'succeeded', stdout: 'cat ended\n' });
    const { task_id: id } = await startTask(w, 'sleep 300', { stdin: false });
    const err = await inputError(w, id, 'hello');
    expect(err).toEqual({ code: 'no_stdin', message: expect.stringContaining('stdin: false') });
    await callView(w, cancelRequest(id));
  });
});

describe('refusals', () => {
  it('refuses input to a finished task with task_finished', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'exit 2');
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'failed' });
    expect(await inputError(w, id, 'late\n')).toEqual({ code: 'task_finished', message: expect.stringContaining('failed') });
  });

  it('refuses input to a task whose supervisor is gone (unknown), signalling nothing', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'read x; sleep 300');
    const status = await statusWithGroup(w, id);
    strays.push(status.group!.pgid);
    process.kill(status.supervisor!.pid, 'SIGKILL');
    await waitFor(async () => (await callView(w, getRequest(id))).state === 'unknown', 'unknown');
    expect(await inputError(w, id, 'x\n')).toMatchObject({ code: 'task_finished', message: expect.stringContaining('unknown') });
    expect(isRunning(status.group!.pgid)).toBe(true);
  });

  it('answers not_found for a task this user never started', async () => {
    expect((await inputError(world(), newTaskId(), 'x')).code).toBe('not_found');
  });

  it('refuses more input after eof with stdin_closed, but a repeated bare eof is no error', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'cat; sleep 300');
    expect(await inputOk(w, id, 'one', true)).toMatchObject({ stdin_closed: true });
    expect(await inputError(w, id, 'two')).toEqual({ code: 'stdin_closed', message: expect.stringContaining('already closed') });
    expect(await inputOk(w, id, '', true)).toEqual({ task_id: id, bytes_written: 0, stdin_closed: true });
    expect((await callView(w, cancelRequest(id))).stdout).toBe('one');
  });

  it('refuses input once the command closed its stdin', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'exec 0<&-; echo closed; sleep 300');
    await waitFor(async () => (await callView(w, getRequest(id, { wait_s: 1 }))).stdout === 'closed\n', 'closed');
    expect(await inputError(w, id, 'x')).toEqual({ code: 'stdin_closed', message: expect.stringContaining('not reading') });
    await callView(w, cancelRequest(id));
  });

  it('refuses input to a task started by an older agent (no stdin in its request), saying so', async () => {
    const w = world();
    const id = newTaskId();
    const dir = taskDirOf(w, id);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // request.json exactly as agents before protocol 1.1 wrote it, supervised by this build.
    const request = { task_id: id, command: 'sleep 300', cwd: w.home, timeout_s: 300, grace_ms: 2000, drain_ms: 500, poll_ms: 50 };
    writeFileSync(join(dir, 'request.json'), JSON.stringify(request));
    const supervisor = execFileSync(
      'bash',
      ['-c', `"$0" "$1" supervise "$2" >/dev/null 2>&1 & echo $!`, process.execPath, AGENT_BUNDLE, dir],
      {
        env: agentEnv(w),
      },
    );
    strays.push(Number(supervisor));
    await waitFor(async () => (await callView(w, getRequest(id))).state === 'running', 'running');
    expect(await inputError(w, id, 'x')).toEqual({ code: 'no_stdin', message: expect.stringContaining('older agent') });
    await callView(w, cancelRequest(id));
  });

  it('rejects data over the byte cap naming the field (multibyte text counts in bytes), without echoing it', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'cat');
    // 20,000 characters, 40,000 bytes of UTF-8.
    const err = await inputError(w, id, 'é'.repeat(20_000));
    expect(err).toEqual({ code: 'invalid_request', message: 'field `data` is too long (maximum 32768 bytes of UTF-8)' });
    expect(await inputOk(w, id, 'é'.repeat(16_384), true)).toMatchObject({ bytes_written: 32_768, stdin_closed: true });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout_size: 32_768 });
  });
});

describe("data on the agent's stdin (data_on_stdin, minor 3)", () => {
  const onStdin = (w: AgentWorld, taskId: string, data: Buffer, eof = false) =>
    call(w, { protocol: 1, op: 'input', task_id: taskId, data_on_stdin: true, eof }, {}, data);

  it('writes the bytes the agent process read from its stdin, and applies eof after them', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'cat');
    expect(await onStdin(w, id, Buffer.from('héllo\n'))).toEqual({
      protocol: 1,
      ok: true,
      result: { task_id: id, bytes_written: 7, stdin_closed: false },
    });
    // Empty stdin with eof: only the close, as an empty inline `data` would be.
    expect(await onStdin(w, id, Buffer.alloc(0), true)).toMatchObject({ ok: true, result: { bytes_written: 0, stdin_closed: true } });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: 'héllo\n' });
  });

  it('holds stdin data to the same rules as inline data, naming the field without echoing it', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'cat');
    const tooLong = await onStdin(w, id, Buffer.from('é'.repeat(16_385)));
    expect(tooLong).toMatchObject({
      ok: false,
      error: { code: 'invalid_request', message: 'field `data` is too long (maximum 32768 bytes of UTF-8)' },
    });
    const notText = await onStdin(w, id, Buffer.from([0x61, 0xff, 0x62]));
    expect(notText).toMatchObject({ ok: false, error: { code: 'invalid_request', message: 'field `data` must be UTF-8 text' } });
    // Exactly one source of data.
    const both = { protocol: 1, op: 'input', task_id: id, data: 'x', data_on_stdin: true };
    const neither = { protocol: 1, op: 'input', task_id: id };
    for (const request of [both, neither]) {
      expect(await call(w, request, {}, Buffer.from('y'))).toMatchObject({
        ok: false,
        error: { code: 'invalid_request', message: 'exactly one of the fields `data` and `data_on_stdin` is required' },
      });
    }
    // Nothing of the refused data reached the task: the exact maximum still fits, then eof ends it.
    expect(await onStdin(w, id, Buffer.from('é'.repeat(16_384)), true)).toMatchObject({ ok: true, result: { bytes_written: 32_768 } });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout_size: 32_768 });
  });
});

describe('a full pipe', () => {
  it('never hangs: it takes what fits within the bound, reports the bytes, and does not close stdin early', async () => {
    const w = world({ SANDBOX_AGENT_INPUT_WAIT_MS: '200' });
    // Reads nothing until told by a file, so the pipe (64 KiB) fills up.
    const go = join(w.home, 'go');
    const { task_id: id } = await startTask(w, `while [ ! -e ${go} ]; do sleep 0.05; done; wc -c`);
    const chunk = 'x'.repeat(32_768);
    let accepted = 0;
    let last: InputResult | undefined;
    for (let i = 0; i < 4; i++) {
      last = await inputOk(w, id, chunk, i === 3);
      accepted += last.bytes_written;
    }
    expect(accepted).toBeLessThan(4 * 32_768);
    expect(accepted).toBeGreaterThan(0);
    // Part of the data did not fit, so eof was not applied: the rest may still follow.
    expect(last).toMatchObject({ stdin_closed: false });
    writeFileSync(go, '');
    // The eof call alone gets a generous bound: the supervisor's confirmation may be slow under load.
    expect(await inputOk(w, id, '', true, { SANDBOX_AGENT_INPUT_WAIT_MS: GENEROUS_WAITS.SANDBOX_AGENT_INPUT_WAIT_MS! })).toMatchObject({
      stdin_closed: true,
    });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: `${accepted}\n` });
  });
});

describe('privacy', () => {
  it('never writes input anywhere in the state directory (not masked, not logged)', async () => {
    const w = world({ AGENT_DEBUG: '1' });
    const token = `input-${newTaskId()}`;
    const { task_id: id } = await startTask(w, 'read x; test -n "$x"');
    await inputOk(w, id, `${token}\n`, true);
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded' });
    const files = readdirSync(taskDirOf(w, id));
    expect(files).toContain('supervisor-debug.log');
    // Files only: the stdin FIFO (as stdin.closed) outlives the final status for a moment, and
    // opening it to read would wait for a writer forever. A FIFO keeps nothing on disk.
    const stored = files.filter((f) => lstatSync(join(taskDirOf(w, id), f)).isFile());
    expect(stored).toContain('supervisor-debug.log');
    for (const f of stored) expect(readFileSync(join(taskDirOf(w, id), f), 'latin1')).not.toContain(token);
  });
});

describe('eof confirmation', () => {
  it('counts stdin as closed when its task ended and removed the FIFO before the rename was seen', async () => {
    // A stand-in supervisor that answers the eof signal as a task that ended at once does: its
    // FIFO is removed, so `stdin.closed` never appears. The eof still took effect.
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-agent-eof-'));
    const fifo = join(dir, 'stdin.fifo');
    execFileSync('mkfifo', [fifo]);
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    const script = `process.on('SIGUSR2', () => { require('fs').unlinkSync(${JSON.stringify(fifo)}); process.exit(0); }); process.stdout.write('ready'); setInterval(() => {}, 1e6);`;
    const stand = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'ignore'] });
    try {
      await new Promise((resolve) => stand.stdout.once('data', resolve));
      const startTime = readProcStat(stand.pid!)!.startTime;
      const status = { supervisor: { pid: stand.pid!, start_time: startTime } } as TaskStatus;
      const delivered = await deliverInput(dir, status, Buffer.from('x'), true, { ...DEFAULT_TIMINGS, inputWaitMs: 10_000 });
      expect(delivered).toEqual({ bytes_written: 1, stdin_closed: true });
    } finally {
      stand.kill('SIGKILL');
      closeSync(reader);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
