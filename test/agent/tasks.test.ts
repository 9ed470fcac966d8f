// Real tasks through the built agent: the start/read/cancel walk, masking, the cap, pages, exit codes,
// group cleanup on completion, long-polling, idempotent start and the task limit.
import { execFileSync, spawn, type StdioOptions } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Readable } from 'node:stream';
import { LIMITS } from '../../shared/limits.js';
import { encodeRequest, type AgentRequestInput, type TaskView } from '../../shared/protocol.js';
import { cancelRequest, getRequest, startRequest } from '../support/agent-requests.js';
import {
  agentEnv,
  call,
  callView,
  newTaskId,
  startTask,
  taskDirOf,
  TERMINAL,
  waitTerminal,
  worldsPerTest,
} from '../support/agent-world.js';
import { AGENT_BUNDLE, fixture } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { sleep, waitFor } from '../support/wait.js';

beforeAll(() => requireBuild());

const { world } = worldsPerTest();

describe('the seeds walk', () => {
  it('reads BEFORE, then AFTER, by byte offsets, each from a fresh agent process', async () => {
    const w = world();
    // AFTER waits for the test to have read BEFORE (a file says so), not for a fixed time that a
    // loaded machine's agent calls could outlast.
    const go = join(w.home, 'before-seen');
    const started = await startTask(w, `printf BEFORE; until [ -e ${go} ]; do sleep 0.05; done; printf AFTER`);
    const id = started.task_id;
    expect(['running', 'succeeded']).toContain(started.state);
    expect(started.started_at).toEqual(expect.any(Number));

    // Follow the task the way a reconnecting client does: offset in, next offset out.
    let offset = 0;
    let text = '';
    const seen: { text: string; state: string }[] = [];
    let view: TaskView;
    do {
      view = await callView(w, getRequest(id, { stdout_offset: offset, wait_s: 5 }));
      if (view.stdout) seen.push({ text: view.stdout, state: view.state });
      if (view.stdout.includes('BEFORE')) writeFileSync(go, '');
      expect(view.stdout_next_offset).toBe(offset + Buffer.byteLength(view.stdout));
      offset = view.stdout_next_offset;
      text += view.stdout;
    } while (!TERMINAL.has(view.state) || offset < view.stdout_size);

    expect(text).toBe('BEFOREAFTER');
    // BEFORE was readable while the task still ran, before AFTER existed.
    expect(seen[0]).toEqual({ text: 'BEFORE', state: 'running' });
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout_size: 11, stdout_truncated: false, stderr: '' });
    expect(view.finished_at).toBeGreaterThanOrEqual(view.started_at!);

    // Re-reading an offset replays the same page.
    const replay = await callView(w, getRequest(id, { stdout_offset: 6 }));
    expect(replay.stdout).toBe('AFTER');
    expect(replay.stdout_next_offset).toBe(11);
  });
});

describe('secret masking', () => {
  it('masks a secret written one byte at a time (stdout and stderr); short values are not masked', async () => {
    const secret = `tok-${newTaskId()}`;
    const w = world({ MY_API_TOKEN: secret, DB_PASSWORD: `pw-${newTaskId().slice(0, 10)}`, TINY_KEY: 'abc' });
    const cmd = `${fixture('print-secret.sh', 'MY_API_TOKEN')}; ${fixture('print-secret.sh', 'DB_PASSWORD')} >&2; echo "short: $TINY_KEY"`;
    const { task_id: id } = await startTask(w, cmd);
    const view = await waitTerminal(w, id);
    expect(view.state).toBe('succeeded');
    expect(view.stdout).toBe('secret: [MASKED] :end\nshort: abc\n');
    expect(view.stderr).toBe('secret: [MASKED] :end\n');
    // What is on disk is what was masked: the value never reached the log.
    const onDisk = readFileSync(join(taskDirOf(w, id), 'stdout.log'), 'utf8') + readFileSync(join(taskDirOf(w, id), 'stderr.log'), 'utf8');
    expect(onDisk).not.toContain(secret);
    expect(onDisk).not.toContain(w.env.DB_PASSWORD);
  });
});

describe('output cap', () => {
  it('keeps exactly 1 MiB of 5 MiB, flags truncation, and the command completes', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, `${fixture('spew-bytes.sh', String(5 * 1024 * 1024))}; echo done >&2`);
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout_size: 1048576, stdout_truncated: true });
    expect(view).toMatchObject({ stderr: 'done\n', stderr_truncated: false });
    expect(readFileSync(join(taskDirOf(w, id), 'stdout.log')).length).toBe(1048576);
    const last = await callView(w, getRequest(id, { stdout_offset: 1048576 - 4, limit: 100 }));
    expect(last).toMatchObject({ stdout: 'xxxx', stdout_next_offset: 1048576 });
    // The largest page still arrives as one JSON line.
    const big = await callView(w, getRequest(id, { stdout_offset: 4096, limit: 65536 }));
    expect(big).toMatchObject({ stdout: 'x'.repeat(65536), stdout_next_offset: 4096 + 65536 });
  });

  it("keeps a capped stream's end, masked, in stdout.tail: a secret cut by the kept bytes' start is dropped, one at the very end masked, none on disk", async () => {
    const secret = `tok-${newTaskId()}`; // hex and 'tok-': no byte of it is in the filler or the marker
    const w = world({ END_TOKEN: secret });
    // 2 MiB of filler, 64 KiB of lines that are the secret, then the secret once more, last.
    const lines = Math.ceil((64 * 1024) / (secret.length + 1));
    const cmd = `${fixture('spew-bytes.sh', String(2 * 1024 * 1024))}; for i in $(seq ${lines}); do echo "$END_TOKEN"; done; printf %s "$END_TOKEN"`;
    // The supervisor keeps the last streamTailBytes + 2 * (longest secret) raw bytes: they must begin inside a secret.
    const kept = LIMITS.streamTailBytes + 2 * secret.length;
    const cutInLine = (kept - secret.length) % (secret.length + 1);
    expect(cutInLine).toBeGreaterThan(1);
    const { task_id: id } = await startTask(w, cmd);
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'succeeded', stdout_size: LIMITS.streamCapBytes, stdout_truncated: true, stderr_truncated: false });
    const dir = taskDirOf(w, id);
    const tail = readFileSync(join(dir, 'stdout.tail'), 'utf8');
    // Nothing of the secret cut at the start survives (its bytes are hex), and the last one is masked.
    expect(tail).toMatch(/^\n?(\[MASKED\]\n)+\[MASKED\]$/);
    expect(existsSync(join(dir, 'stderr.tail'))).toBe(false);
    // No file of the task holds the secret, whole or its first or last half.
    for (const name of readdirSync(dir)) {
      const bytes = readFileSync(join(dir, name));
      for (const part of [secret, secret.slice(0, 18), secret.slice(-18)])
        expect(bytes.includes(part), `${name} holds ${part.length} bytes of it`).toBe(false);
    }
    // get gives the tail with a page that reaches the log's end, as much as asked for.
    const atEnd = await callView(w, getRequest(id, { stdout_offset: LIMITS.streamCapBytes, tail_bytes: 9 }));
    expect(atEnd).toMatchObject({ stdout: '', stdout_tail: '\n[MASKED]' });
    expect(atEnd.stderr_tail).toBeUndefined();
    const first = await callView(w, getRequest(id, { tail_bytes: 9 }));
    expect(first.stdout_tail).toBeUndefined();
    // A task of an older supervisor (no tail file) reads as before.
    rmSync(join(dir, 'stdout.tail'));
    const older = await callView(w, getRequest(id, { stdout_offset: LIMITS.streamCapBytes, tail_bytes: 9 }));
    expect(older).toMatchObject({ state: 'succeeded', stdout: '', stdout_truncated: true });
    expect(older.stdout_tail).toBeUndefined();
  });

  it('without tail, drops the rest through cat as before: truncated, no tail', async () => {
    const w = world();
    const bin = join(w.home, 'bin');
    mkdirSync(bin);
    for (const tool of ['bash', 'head', 'tr', 'mkfifo', 'cat'])
      symlinkSync(
        execFileSync('bash', ['-c', `command -v ${tool}`])
          .toString()
          .trim(),
        join(bin, tool),
      );
    const { task_id: id } = await callView(w, startRequest(`${fixture('spew-bytes.sh', String(3 * 1024 * 1024))}; echo END`), {
      PATH: bin,
    });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout_size: LIMITS.streamCapBytes, stdout_truncated: true });
    expect(existsSync(join(taskDirOf(w, id), 'stdout.tail'))).toBe(false);
  });

  it('does not flag truncation for output of exactly the cap', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, fixture('spew-bytes.sh', '1048576'));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout_size: 1048576, stdout_truncated: false });
  });
});

describe('without mkfifo and cat', () => {
  it('falls back to plain pipes with the same cap and masking', async () => {
    const secret = `tok-${newTaskId()}`;
    const w = world({ FALLBACK_TOKEN: secret });
    // A PATH with just what the command needs: no mkfifo, no cat.
    const bin = join(w.home, 'bin');
    mkdirSync(bin);
    for (const tool of ['bash', 'head', 'tr', 'printenv', 'sleep'])
      symlinkSync(
        execFileSync('bash', ['-c', `command -v ${tool}`])
          .toString()
          .trim(),
        join(bin, tool),
      );
    const env = { PATH: bin, AGENT_DEBUG: '1' };
    const cmd = `${fixture('print-secret.sh', 'FALLBACK_TOKEN')}; ${fixture('spew-bytes.sh', String(3 * 1024 * 1024))}`;
    const { task_id: id } = await callView(w, startRequest(cmd), env);
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'succeeded', stdout_size: 1048576, stdout_truncated: true });
    expect(view.stdout.startsWith('secret: [MASKED] :end\nxxx')).toBe(true);
    expect(readFileSync(join(taskDirOf(w, id), 'supervisor-debug.log'), 'utf8')).toContain('draining plain child-process pipes');
    // Read here, the stream's end is kept all the same.
    expect(readFileSync(join(taskDirOf(w, id), 'stdout.tail'), 'utf8')).toBe('x'.repeat(LIMITS.streamTailBytes));
  });
});

describe('pages', () => {
  it('ends a page before a multibyte character its limit would split, so pages read on join up whole', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, "printf 'ab\\342\\202\\254d\\360\\237\\230\\200\\377e'"); // ab€d😀 \xff e: € = e2 82 ac, 😀 = f0 9f 98 80
    await waitTerminal(w, id);
    const get = (stdout_offset: number, limit: number) => callView(w, getRequest(id, { stdout_offset, limit }));
    // Without the rule, this page was 'ab\uFFFD' up to byte 3 and the next began with two more U+FFFD.
    expect(await get(0, 3)).toMatchObject({ stdout: 'ab', stdout_next_offset: 2, stdout_size: 12 });
    expect(await get(2, 3)).toMatchObject({ stdout: '€', stdout_next_offset: 5 });
    // A page that starts inside a character (an offset the caller chose) still decodes as it is.
    expect(await get(3, 3)).toMatchObject({ stdout: '\uFFFD\uFFFDd', stdout_next_offset: 6 });
    // A page holding only the start of a character returns it, so every page advances.
    expect(await get(6, 2)).toMatchObject({ stdout: '\uFFFD', stdout_next_offset: 8 });
    expect(await get(12, 3)).toMatchObject({ stdout: '', stdout_next_offset: 12 });
    for (const limit of [4, 5, 7]) {
      // (A limit of 3 could never hold 😀's four bytes.)
      let text = '';
      for (let offset = 0; offset < 12;) {
        const page = await get(offset, limit);
        text += page.stdout;
        offset = page.stdout_next_offset;
      }
      // The only U+FFFD left is the invalid byte's.
      expect(text, `limit ${limit}`).toBe('ab€d😀\uFFFDe');
    }
  });
});

describe('offsets past the end', () => {
  it("refuses an offset past its log's end, naming the field and the size but not the offset, at once for a waiting get, stopping nothing for a cancel; at the end or the cap, an empty page", async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'printf hello; printf E >&2; sleep 300');
    await waitFor(async () => {
      const v = await callView(w, getRequest(id));
      return v.stdout_size === 5 && v.stderr_size === 1;
    }, 'the output');
    const pastEnd = async (request: AgentRequestInput, stream: 'stdout' | 'stderr', size: number) => {
      const res = await call(w, request);
      expect(res).toMatchObject({
        ok: false,
        error: {
          code: 'invalid_request',
          message: `\`${stream}_offset\` is past the end of ${stream} (${size} bytes so far): pass a previous ${stream}_next_offset`,
        },
      });
      expect(JSON.stringify(res)).not.toContain('4242');
    };
    await pastEnd(getRequest(id, { stdout_offset: 4242 }), 'stdout', 5);
    // A waiting get too: it is refused before its wait, never after one.
    await pastEnd(getRequest(id, { stderr_offset: 4242, wait_s: 30 }), 'stderr', 1);
    await pastEnd(cancelRequest(id, { stdout_offset: 0, stderr_offset: 4242, limit: 10 }), 'stderr', 1);
    // At each log's end: an empty page, the same next offsets; the refused cancel stopped nothing.
    expect(await callView(w, getRequest(id, { stdout_offset: 5, stderr_offset: 1 }))).toMatchObject({
      state: 'running',
      stdout: '',
      stderr: '',
      stdout_next_offset: 5,
      stderr_next_offset: 1,
    });
    // At the cap (no log grows past it): the state alone, as the host asks for it.
    const cap = LIMITS.streamCapBytes;
    expect(await callView(w, getRequest(id, { stdout_offset: cap, stderr_offset: cap }))).toMatchObject({
      stdout: '',
      stdout_next_offset: cap,
    });
    await callView(w, cancelRequest(id));
  });
});

describe('exit codes and group cleanup', () => {
  it('reports a nonzero exit as failed with its exit code', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, fixture('exit-n.sh', '3'));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'failed', exit_code: 3, stdout: 'exiting with 3\n', stderr: 'to stderr\n' });
  });

  it('reports death by a signal as 128+signal', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'kill -KILL $$');
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'failed', exit_code: 137 });
  });

  it('cleans up same-group descendants when the command completes', async () => {
    const w = world({ SANDBOX_AGENT_GRACE_MS: '300' });
    const { task_id: id } = await startTask(w, 'sleep 300 & echo $!; trap "" TERM; (trap "" TERM; exec sleep 301) & echo $!', {});
    const view = await waitTerminal(w, id);
    expect(view.state).toBe('succeeded');
    const pids = view.stdout.trim().split('\n').map(Number);
    expect(pids).toHaveLength(2);
    // One descendant obeys TERM, the other needs the KILL that follows the grace period.
    await waitFor(() => pids.every((p) => !isRunning(p)), 'descendants to die');
  });
});

describe('long-polling get', () => {
  it('returns as soon as new output appears', async () => {
    const w = world();
    // After `hi` the task waits for a file the test makes only once the get has answered; without it
    // (a get that sat out its wait) the task gives up after 20 s and ends with `late`: a get that
    // waited to its end (30 s) would show that, not the running task and `hi` alone.
    const go = join(w.stateDir, 'go');
    const command =
      `sleep 1; echo hi; i=0; while [ ! -e '${go}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; ` +
      `[ -e '${go}' ] || { echo late; exit 7; }; sleep 300`;
    const { task_id: id } = await startTask(w, command);
    const view = await callView(w, getRequest(id, { wait_s: 30 }));
    writeFileSync(go, '');
    expect(view).toMatchObject({ state: 'running', stdout: 'hi\n', stdout_next_offset: 3 });
    await callView(w, cancelRequest(id));
  });

  it('returns when the state changes without new output', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'sleep 1; exit 4');
    const view = await callView(w, getRequest(id, { wait_s: 20 }));
    expect(view).toMatchObject({ state: 'failed', exit_code: 4, stdout: '' });
  });

  it('returns the running state when the wait ends with nothing new', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, fixture('forever.sh'));
    const ready = await waitFor(async () => {
      const v = await callView(w, getRequest(id));
      return v.stdout === 'ready\n' ? v : null;
    }, 'readiness');
    const view = await callView(w, getRequest(id, { stdout_offset: ready.stdout_next_offset, wait_s: 1 }));
    expect(view).toMatchObject({ state: 'running', stdout: '', stdout_next_offset: 6 });
    await callView(w, cancelRequest(id));
  });
});

describe('start', () => {
  it('runs the same task_id once, even for concurrent starts', async () => {
    const w = world();
    const id = newTaskId();
    const cmd = `echo run >> ${JSON.stringify(join(w.home, 'runs.txt'))}; sleep 0.3`;
    const [a, b] = await Promise.all([startTask(w, cmd, { task_id: id }), startTask(w, cmd, { task_id: id })]);
    expect(a.task_id).toBe(id);
    expect(b.task_id).toBe(id);
    await waitTerminal(w, id);
    const again = await startTask(w, cmd, { task_id: id });
    expect(again).toMatchObject({ task_id: id, state: 'succeeded' });
    expect(readFileSync(join(w.home, 'runs.txt'), 'utf8')).toBe('run\n');
  });

  it('does not pass a descriptor leaked by its caller on to the supervisor or the command', async () => {
    const w = world();
    const id = newTaskId();
    // fd 40 is a pipe without close-on-exec, as an exec service might leak one (node itself
    // reuses the lowest descriptors at start-up, so a low one would not show the leak).
    const stdio: StdioOptions = ['ignore', 'pipe', 'inherit', ...Array<'ignore'>(37).fill('ignore'), 'pipe'];
    const agent = spawn(process.execPath, [AGENT_BUNDLE, 'call', encodeRequest(startRequest('sleep 300', { task_id: id }))], {
      env: agentEnv(w),
      stdio,
    });
    const leaked = (agent.stdio as unknown[])[40] as Readable;
    const eof = new Promise<boolean>((resolve) => {
      leaked.on('data', () => {});
      leaked.once('end', () => resolve(true));
      leaked.once('error', () => resolve(true));
    });
    let out = '';
    agent.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    // 'exit', not 'close': close would also wait for the leaked pipe.
    await Promise.all([
      new Promise((resolve) => agent.once('exit', resolve)),
      new Promise((resolve) => agent.stdout!.once('end', resolve)),
    ]);
    expect(JSON.parse(out)).toMatchObject({ ok: true, result: { state: 'running' } });
    // Only the exited agent held the other end, so EOF comes now, not when the task ends.
    expect(await Promise.race([eof, sleep(15_000).then(() => false)])).toBe(true);
    expect(await callView(w, getRequest(id))).toMatchObject({ state: 'running' });
    await callView(w, cancelRequest(id));
  });

  it('runs in cwd (relative to HOME) with the environment it was started with', async () => {
    const w = world({ GREETING: 'hello there' });
    mkdirSync(join(w.home, 'work'));
    const { task_id: id } = await startTask(w, 'pwd; echo "$GREETING"', { cwd: 'work' });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: `${join(w.home, 'work')}\nhello there\n` });
  });

  it('without HOME, runs in the home directory of the password database', async () => {
    const w = world();
    const { task_id: id } = await callView(w, startRequest('pwd'), { HOME: '' });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: `${userInfo().homedir}\n` });
  });

  it('answers a clear error, naming the setting, when the state directory cannot be created', async () => {
    const w = world();
    const notADir = join(w.home, 'plain-file');
    writeFileSync(notADir, '');
    const res = await call(w, startRequest('true'), { SANDBOX_AGENT_STATE_DIR: join(notADir, 'state') });
    expect(res).toMatchObject({ ok: false, error: { code: 'internal', message: expect.stringContaining('SANDBOX_AGENT_STATE_DIR') } });
    expect(res.ok ? '' : res.error.message).not.toContain(notADir);
  });

  it('keeps task directories private (0700)', async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'true');
    await waitTerminal(w, id);
    const { statSync } = await import('node:fs');
    for (const dir of [w.stateDir, join(w.stateDir, 'tasks'), taskDirOf(w, id)]) expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('refuses the 129th task with task_limit, but still answers for existing ones', async () => {
    const w = world();
    const tasks = join(w.stateDir, 'tasks');
    mkdirSync(tasks, { recursive: true, mode: 0o700 });
    const ids = Array.from({ length: 128 }, newTaskId);
    for (const id of ids) mkdirSync(join(tasks, id), { mode: 0o700 });
    // Old enough not to look like a start in progress.
    const past = new Date(Date.now() - 60_000);
    utimesSync(join(tasks, ids[0]!), past, past);
    const extra = newTaskId();
    const res = await call(w, startRequest('true', { task_id: extra }));
    expect(res).toMatchObject({ ok: false, error: { code: 'task_limit' } });
    expect(existsSync(join(tasks, extra))).toBe(false);
    expect(readdirSync(tasks)).toHaveLength(128);
    // Starting an existing id is not a new task: it reports that task (here: no status yet).
    const existing = await startTask(w, 'true', { task_id: ids[0]! });
    expect(existing).toMatchObject({ state: 'unknown', error: { code: 'no_status' } });
    // The way out it names works: removing a task directory one no longer needs frees its place.
    const advice = (res as { error: { message: string } }).error.message;
    expect(advice).toContain('rm -r ~/.local/state/sandbox-agent/tasks/<task_id>');
    rmSync(join(tasks, ids[1]!), { recursive: true });
    expect((await startTask(w, 'true', { task_id: extra })).task_id).toBe(extra);
  });
});

describe('unknown states', () => {
  it('reads a task directory without a status record as unknown', async () => {
    const w = world();
    const id = newTaskId();
    mkdirSync(join(w.stateDir, 'tasks', id), { recursive: true, mode: 0o700 });
    const view = await callView(w, getRequest(id, { wait_s: 1 }));
    expect(view).toMatchObject({
      state: 'unknown',
      exit_code: null,
      started_at: null,
      stdout: '',
      stdout_size: 0,
      error: { code: 'no_status' },
    });
    expect(await callView(w, cancelRequest(id))).toMatchObject({ state: 'unknown' });
  });
});
