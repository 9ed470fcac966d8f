// The resident agent (`agent.cjs serve`), built, in a temporary world: frames in any order, the
// exec op (plain and promotable), starts, and durability — a resident that stops, or is killed -9
// at any moment, loses no task and no byte: every start and promotable exec has a supervisor of
// its own from the first byte, the only reader of its output. Tasks are read back with per-call agents
// (`agent.cjs call`), a process of their own, as another server would.
import { createHash, randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ExecResultSchema, TaskViewSchema, type ExecFinished, type TaskView } from '../../shared/protocol.js';
import {
  cancelRequest,
  execRequest,
  getRequest,
  helloRequest,
  inputRequest,
  listRequest,
  startRequest,
  type ExecFields,
  type StartFields,
} from '../support/agent-requests.js';
import {
  agentEnv,
  call,
  callView,
  newTaskId,
  readStatusJson,
  resultOf,
  taskDirOf,
  waitTerminal,
  worldsPerTest,
  type AgentWorld,
} from '../support/agent-world.js';
import { AGENT_BUNDLE } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { isWaitingForTask, startResident, toldShellOf, warmSupervisorsOf, type Resident } from '../support/resident-world.js';
import { unlessTimedOut, waitFor } from '../support/wait.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { removeAtEnd } from '../support/scratch.js';

beforeAll(() => requireBuild());

const { world, strays } = worldsPerTest();

async function exec(r: Resident, w: AgentWorld, command: string, extra: ExecFields = {}): Promise<ExecFinished> {
  const res = await r.requestExec(execRequest(command, { env: agentEnv(w), ...extra }));
  if (res.kind !== 'finished') throw new Error('promoted');
  return res;
}

const text = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
const sha = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');
/** The whole of both logs of a task, read from its directory. */
const logs = (w: AgentWorld, id: string) => [0, 1].map((i) => readFileSync(join(taskDirOf(w, id), ['stdout.log', 'stderr.log'][i]!)));

/**
 * A command printing `lines` numbered lines on each stream in bursts, then exiting `code`; with
 * `gate`, it exits only once that file exists (see untilExists).
 */
function burstCommand(lines: number, bursts: number, code: number, secret?: string, gate?: string): string {
  const per = lines / bursts;
  const tail = secret ? `; echo "secret $${secret}" >&2` : '';
  const wait = gate ? `; ${untilExists(gate)}` : '';
  return `for j in $(seq 0 ${bursts - 1}); do awk -v j=$j 'BEGIN{for(i=j*${per}+1;i<=(j+1)*${per};i++){print "o" i; print "e" i > "/dev/stderr"}}'; sleep 0.05; done${tail}${wait}; exit ${code}`;
}

/**
 * Shell that waits until `path` exists: a command that must outlive a promotion window waits for
 * the test to see it promoted, not for a fixed time. The window starts once the start has its
 * first report, so a loaded machine can spend much of a fixed time before it.
 */
const untilExists = (path: string): string => `until [ -e ${path} ]; do sleep 0.05; done`;

function expectedBurst(lines: number, prefix: string): string {
  let s = '';
  for (let i = 1; i <= lines; i++) s += `${prefix}${i}\n`;
  return s;
}

describe('the resident serving frames', () => {
  it('greets with its versions and ops, and answers in any order: a waiting get holds up nothing', async () => {
    const w = world();
    const r = await startResident(w);
    expect(r.hello).toMatchObject({ resident: true, protocol: 1, protocol_minor: 11, promotable: true });
    expect(r.hello.ops).toEqual(
      expect.arrayContaining(['start', 'get', 'cancel', 'input', 'list', 'remove', 'exec', 'read_file', 'write_file', 'list_files']),
    );
    const task = await r.requestView(startRequest('sleep 30', { env: agentEnv(w) }));
    let isWaitDone = false;
    const waiting = r.request(getRequest(task.task_id, { wait_s: 5 })).then((res) => {
      isWaitDone = true;
      return res;
    });
    expect(text((await exec(r, w, 'echo meanwhile')).stdout_b64)).toBe('meanwhile\n');
    expect(isWaitDone).toBe(false);
    await r.requestView(cancelRequest(task.task_id));
    expect(TaskViewSchema.parse(resultOf(await waiting)).state).toBe('cancelled');
    // A frame outside the protocol ends it (after handing over what it runs).
    r.process.stdin!.write('not json\n');
    await r.exited;
  });
});

describe('exec', () => {
  it('runs with exactly the environment, cwd and stdin it is given (its own as the base only without its compile cache); the cap keeps head and tail', async () => {
    const w = world();
    // The keeper starts a local resident with node's compile cache set: the agent's, never a command's.
    const r = await startResident(w, { RESIDENT_OWN: 'resident-only', NODE_COMPILE_CACHE: join(w.home, '.agent-compile-cache') });
    const res = await exec(r, w, 'echo "$FROM_CALL/${RESIDENT_OWN:-none}"; pwd; cat; echo err >&2; exit 3', {
      env: agentEnv(w, { FROM_CALL: 'call' }),
      cwd: '/tmp',
      stdin_b64: Buffer.from('typed\n').toString('base64'),
    });
    expect(res).toMatchObject({ exit_code: 3, timed_out: false });
    expect(text(res.stdout_b64)).toBe('call/none\n/tmp\ntyped\n');
    expect(text(res.stderr_b64)).toBe('err\n');
    // With inherit_env, the resident's own environment is the base.
    const inherited = await exec(r, w, 'echo "$RESIDENT_OWN/${NODE_COMPILE_CACHE:-unset}"', { env: {}, inherit_env: true });
    expect(text(inherited.stdout_b64)).toBe('resident-only/unset\n');
    const big = await exec(r, w, 'seq 1 100000');
    expect(big).toMatchObject({ stdout_truncated: true, stdout_head_bytes: 32_768 });
    const out = text(big.stdout_b64);
    expect(out.startsWith('1\n2\n')).toBe(true);
    expect(out.endsWith('99999\n100000\n')).toBe(true);
    expect(Buffer.byteLength(out)).toBe(65_536);
    // A missing cwd is its own error, before anything runs.
    const missing = await r.request(execRequest('true', { env: agentEnv(w), cwd: '/nonexistent', timeout_ms: 1000, max_output_bytes: 10 }));
    expect(missing).toMatchObject({ ok: false, error: { code: 'cwd_not_found' } });
  });

  it('kills the whole group at the timeout and when the caller gives up', async () => {
    const w = world();
    const r = await startResident(w);
    const timedOut = await exec(r, w, 'sleep 30 & sleep 30; echo never', { timeout_ms: 300 });
    expect(timedOut).toMatchObject({ timed_out: true, exit_code: 137 });
    const sent = r.send(execRequest('echo $$ > pid; sleep 30 & sleep 30', { env: agentEnv(w), cwd: w.home, max_output_bytes: 100 }));
    const pid = await waitFor(
      () => (existsSync(join(w.home, 'pid')) ? Number(readFileSync(join(w.home, 'pid'), 'utf8')) : 0),
      'the command to start',
    );
    r.abort(sent.id, 'cancelled');
    expect(ExecResultSchema.parse(resultOf(await sent.answer))).toMatchObject({ kind: 'finished', timed_out: false, exit_code: 137 });
    expect(isRunning(pid)).toBe(false);
  });

  it('applies the bounds it is given, and refuses a command the sandbox has no room for', async () => {
    const w = world();
    const r = await startResident(w);
    const bounds = { processes: 500, open_files: 256, refuse_at: 100_000, oom_score_adj: 500 };
    const probe = await exec(r, w, 'ulimit -u; ulimit -n; ulimit -c; cat /proc/self/oom_score_adj', { bounds });
    expect(text(probe.stdout_b64).split('\n').slice(0, 4)).toEqual(['500', '256', '0', String(Math.max(500, ownOomScoreAdj()))]);
    const refused = await r.request(
      execRequest('true', { env: agentEnv(w), timeout_ms: 1000, max_output_bytes: 10, bounds: { ...bounds, refuse_at: 1 } }),
    );
    expect(refused).toMatchObject({ ok: false, error: { code: 'process_limit' } });
    const start = await r.request(startRequest('true', { env: agentEnv(w), bounds: { ...bounds, refuse_at: 1 } }));
    expect(start).toMatchObject({ ok: false, error: { code: 'process_limit' } });
  });

  it('promotable, ending in time: the usual result read from its task, capped head and tail, and no task directory is left', async () => {
    const w = world();
    const r = await startResident(w);
    const id = newTaskId();
    const res = await exec(r, w, 'seq 1 20000; echo quick >&2; exit 4', {
      max_output_bytes: 1000,
      promote: { task_id: id, after_ms: 30_000 },
    });
    expect(res).toMatchObject({ exit_code: 4, timed_out: false, stdout_truncated: true, stderr_truncated: false, stdout_head_bytes: 500 });
    const out = text(res.stdout_b64);
    expect(out.length).toBe(1000);
    expect(out.startsWith('1\n2\n3\n')).toBe(true);
    expect(out.endsWith('19999\n20000\n')).toBe(true);
    expect(text(res.stderr_b64)).toBe('quick\n');
    // Renamed aside, then deleted (in the resident, a process of its own): nothing is left once both are done.
    await waitFor(() => readdirSync(join(w.stateDir, 'tasks')).length === 0, 'the finished task directory to go');
    expect(existsSync(taskDirOf(w, id))).toBe(false);
  });

  it("promotable, a command that fits in one argument but not behind the prelude: it still runs (sh, then the command's shell)", async () => {
    const w = world();
    const r = await startResident(w);
    // Under the kernel's 128 KiB for one argument (its NUL included) alone, over it behind even the shortest prelude (the OOM score's, 55 bytes).
    const command = `: ${'x'.repeat(131_030)}; echo "long-ok $#"`;
    expect(Buffer.byteLength(command)).toBeLessThan(32 * 4096);
    expect(Buffer.byteLength(command)).toBeGreaterThan(32 * 4096 - 50);
    const res = await exec(r, w, command, { promote: { task_id: newTaskId(), after_ms: 30_000 } });
    expect(res).toMatchObject({ kind: 'finished', exit_code: 0 });
    expect(text(res.stdout_b64)).toBe('long-ok 0\n');
  });
});

describe("remove_file (run_code's program)", () => {
  /** A fresh run_code file name in /tmp (the host's: the protocol's name), holding `body`; removed at the end should the test fail first. */
  const programFile = (body = 'x'): string => {
    const path = removeAtEnd(`/tmp/sandbox-mcp-code-${randomBytes(8).toString('hex')}.sh`);
    writeFileSync(path, body);
    return path;
  };

  it("is removed once the command ends, however it ends: a plain exec (exit, timeout, abort), a promotable one (in time, promoted and cancelled), a start (the per-call agent's too); a symlink by that name goes, never its target", async () => {
    const w = world();
    const r = await startResident(w);
    // A plain exec: its exit, its timeout, the caller giving up.
    const exited = programFile();
    expect(await exec(r, w, `test -e ${exited} && echo there`, { remove_file: exited })).toMatchObject({ exit_code: 0 });
    expect(existsSync(exited)).toBe(false);
    const timedOut = programFile();
    expect(await exec(r, w, 'sleep 30', { remove_file: timedOut, timeout_ms: 300 })).toMatchObject({ timed_out: true });
    expect(existsSync(timedOut)).toBe(false);
    const aborted = programFile();
    const sent = r.send(execRequest('sleep 30', { env: agentEnv(w), max_output_bytes: 100, remove_file: aborted }));
    await sleep(200);
    expect(existsSync(aborted)).toBe(true);
    r.abort(sent.id, 'cancelled');
    await sent.answer;
    expect(existsSync(aborted)).toBe(false);
    // Promotable: ended in time; promoted, then cancelled (its supervisor removes it).
    const inTime = programFile();
    expect(await exec(r, w, 'true', { remove_file: inTime, promote: { task_id: newTaskId(), after_ms: 30_000 } })).toMatchObject({
      exit_code: 0,
    });
    expect(existsSync(inTime)).toBe(false);
    const promotedFile = programFile();
    const id = newTaskId();
    const promoted = await r.requestExec(
      execRequest('sleep 30', {
        env: agentEnv(w),
        timeout_ms: 60_000,
        max_output_bytes: 100,
        remove_file: promotedFile,
        promote: { task_id: id, after_ms: 100 },
      }),
    );
    expect(promoted.kind).toBe('promoted');
    expect(existsSync(promotedFile)).toBe(true);
    expect(await callView(w, cancelRequest(id))).toMatchObject({ state: 'cancelled' });
    expect(existsSync(promotedFile)).toBe(false);
    // A start, through the resident and through a per-call agent; a symlink by the name is unlinked, its target stays.
    const target = join(w.home, 'target');
    writeFileSync(target, 'kept');
    for (const how of ['resident', 'per-call'] as const) {
      const link = removeAtEnd(`/tmp/sandbox-mcp-code-${randomBytes(8).toString('hex')}.py`);
      symlinkSync(target, link);
      const start = startRequest('exit 3', { remove_file: link });
      const res = how === 'resident' ? await r.request(start) : await call(w, start);
      expect(res.ok).toBe(true);
      expect((await waitTerminal(w, start.task_id)).state).toBe('failed');
      expect(lstatExists(link)).toBe(false);
      expect(readFileSync(target, 'utf8')).toBe('kept');
    }
    await r.close();
  });

  it('names nothing but a run_code file: any other path is refused, naming the field, never echoing it, and nothing runs', async () => {
    const w = world();
    const r = await startResident(w);
    const victim = join(w.home, 'victim');
    writeFileSync(victim, 'kept');
    for (const path of [victim, '/tmp/sandbox-mcp-code-../etc', '/tmp/sandbox-mcp-code-0123456789abcdef.py/..', '/tmp/other.py']) {
      for (const request of [
        execRequest(`touch ${w.home}/ran`, { env: agentEnv(w), timeout_ms: 1000, max_output_bytes: 10, remove_file: path }),
        startRequest(`touch ${w.home}/ran`, { remove_file: path }),
      ]) {
        for (const res of [await r.request(request), await call(w, request)]) {
          if (res.ok) throw new Error(`accepted ${path}`);
          expect(res.error.code).toBe('invalid_request');
          expect(res.error.message).toContain('remove_file');
          expect(res.error.message).not.toContain(path);
        }
      }
    }
    expect(readFileSync(victim, 'utf8')).toBe('kept');
    expect(existsSync(join(w.home, 'ran'))).toBe(false);
    await r.close();
  });
});

/** True when `path` names anything, a dangling symlink included. */
function lstatExists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

describe('promotion', () => {
  it('a promotable exec runs under a supervisor of its own from the first byte; still running at its window, it is the task: byte-exact, masked, its exit code', async () => {
    const secret = `tok-${newTaskId()}`;
    const w = world();
    const r = await startResident(w);
    const id = newTaskId();
    const go = join(w.home, 'go');
    const res = await r.requestExec(
      execRequest(burstCommand(120_000, 20, 3, 'API_TOKEN', go), {
        env: agentEnv(w, { API_TOKEN: secret }),
        timeout_ms: 120_000,
        promote: { task_id: id, after_ms: 300 },
      }),
    );
    expect(res.kind).toBe('promoted');
    writeFileSync(go, '');
    // Its supervisor had recorded itself by the answer: the resident never read its output.
    const supervisor = readStatusJson(w, id).supervisor as { pid: number } | null;
    expect(supervisor).not.toBeNull();
    expect(supervisor!.pid).not.toBe(r.process.pid);
    const view = await waitTerminal(w, id, 120_000);
    expect(view).toMatchObject({ state: 'failed', exit_code: 3, stdout_truncated: false, stderr_truncated: false });
    const [out, err] = logs(w, id);
    expect(sha(out!)).toBe(sha(expectedBurst(120_000, 'o')));
    expect(sha(err!)).toBe(sha(expectedBurst(120_000, 'e') + 'secret [MASKED]\n'));
    // The same supervisor recorded the outcome.
    expect(readStatusJson(w, id).supervisor).toEqual(supervisor);
  });

  it('a secret split across two writes is masked, in a promoted task and in a result that ended in time', async () => {
    const secret = 'abcdefghSECRET12';
    const w = world();
    const r = await startResident(w);
    // The second half comes 0.6 s after the first, and once the test has seen the call promoted.
    const go = join(w.home, 'go');
    const run = async (id: string, afterMs: number) =>
      await r.requestExec(
        execRequest(`printf 'x %s' "\${TOKEN:0:8}"; sleep 0.6; ${untilExists(go)}; printf '%s y\\n' "\${TOKEN:8}"`, {
          env: agentEnv(w, { TOKEN: secret }),
          promote: { task_id: id, after_ms: afterMs },
        }),
      );
    const promotedId = newTaskId();
    expect((await run(promotedId, 200)).kind).toBe('promoted');
    writeFileSync(go, '');
    expect(await waitTerminal(w, promotedId)).toMatchObject({ state: 'succeeded', stdout: 'x [MASKED] y\n' });
    const inTime = await run(newTaskId(), 30_000);
    expect(inTime.kind).toBe('finished');
    expect(text((inTime as ExecFinished).stdout_b64)).toBe('x [MASKED] y\n');
  });

  it('a start, short or long, runs under a supervisor of its own that has recorded itself by the answer', async () => {
    const w = world();
    const r = await startResident(w);
    const quick = await r.requestView(startRequest('echo done', { env: agentEnv(w) }));
    expect(quick).toMatchObject({ state: 'succeeded', stdout: 'done\n' });
    const quickSupervisor = readStatusJson(w, quick.task_id).supervisor as { pid: number } | null;
    expect(quickSupervisor).not.toBeNull();
    expect(quickSupervisor!.pid).not.toBe(r.process.pid);
    const long = await r.requestView(startRequest('sleep 1; echo late', { env: agentEnv(w) }));
    expect(long.state).toBe('running');
    const longSupervisor = readStatusJson(w, long.task_id).supervisor as { pid: number } | null;
    expect(longSupervisor).not.toBeNull();
    expect(longSupervisor!.pid).not.toBe(r.process.pid);
    expect(await waitTerminal(w, long.task_id)).toMatchObject({ state: 'succeeded', stdout: 'late\n' });
    expect(readStatusJson(w, long.task_id).supervisor).toEqual(longSupervisor);
  });
});

describe('what a command leaves running in its group', () => {
  it('outlives a promotable exec, as it does a plain one; a start stops it, and a timed-out exec stops it too', async () => {
    const w = world();
    const r = await startResident(w);
    const leftover = async (extra: Record<string, unknown>): Promise<number> =>
      Number(text((await exec(r, w, 'sleep 300 >/dev/null 2>&1 & echo $!', extra)).stdout_b64).trim());
    const plain = await leftover({});
    const promoted = await leftover({ promote: { task_id: newTaskId(), after_ms: 30_000 } });
    strays.push(plain, promoted);
    expect(isRunning(plain)).toBe(true);
    expect(isRunning(promoted)).toBe(true);
    const start = await r.requestView(startRequest('sleep 300 >/dev/null 2>&1 & echo $!', { env: agentEnv(w) }));
    const ended = await waitTerminal(w, start.task_id);
    expect(ended.state).toBe('succeeded');
    expect(isRunning(Number(ended.stdout.trim()))).toBe(false);
    const timedOut = (await r.requestExec(
      execRequest('sleep 300 >/dev/null 2>&1 & echo $!; sleep 300', {
        env: agentEnv(w),
        timeout_ms: 1000,
        promote: { task_id: newTaskId(), after_ms: 30_000 },
      }),
    )) as ExecFinished;
    expect(timedOut).toMatchObject({ kind: 'finished', timed_out: true });
    await waitFor(() => !isRunning(Number(text(timedOut.stdout_b64).trim())), "the timed-out exec's leftover stopped");
  });
});

describe('supervisors the resident reuses (warm)', () => {
  /** Keeps a supervisor busy: a start of `sleep 600` of the given shape (cancelled by the caller). */
  const holdOne = async (r: Resident, extra: StartFields = {}): Promise<string> =>
    (await r.requestView(startRequest('sleep 600', extra))).task_id;

  it("supervises the next start and promotable exec once its task ends, with the call's environment and cwd, masks its secrets, and is retired when calls stop", async () => {
    const w = world();
    const secret = `tok-${newTaskId()}`;
    // No boot ahead within this test: only reuse can give a task a supervisor that is already there.
    const r = await startResident(w, { SANDBOX_AGENT_WARM_IDLE_MS: '3000', SANDBOX_AGENT_WARM_QUIET_MS: '600000' });
    // Its supervisors inherit 1000: the command prelude's `echo 500 > oom_score_adj` then fails.
    writeFileSync(`/proc/${r.process.pid}/oom_score_adj`, '1000');
    expect(warmSupervisorsOf(r)).toEqual([]);
    const first = await r.requestView(startRequest('true', { env: agentEnv(w) }));
    expect(first.state).toBe('succeeded');
    const booted = await waitFor(
      () => (warmSupervisorsOf(r).length === 1 ? warmSupervisorsOf(r)[0] : undefined),
      "the first start's supervisor",
    );
    expect(readStatusJson(w, first.task_id).supervisor).toMatchObject({ pid: booted });
    await waitFor(() => isWaitingForTask(booted!), 'it waits for the next task');
    const task = await r.requestView(
      startRequest('echo "$FROM_CALL $(pwd)"; echo "key $API_TOKEN" >&2; exit 4', {
        cwd: '/tmp',
        env: agentEnv(w, { FROM_CALL: 'call', API_TOKEN: secret }),
      }),
    );
    // The same process supervises the second task: recorded as its supervisor, no other started.
    expect(readStatusJson(w, task.task_id).supervisor).toMatchObject({ pid: booted });
    expect(await waitTerminal(w, task.task_id)).toMatchObject({ state: 'failed', exit_code: 4, stdout: 'call /tmp\n' });
    expect(logs(w, task.task_id)[1]!.toString()).toBe('key [MASKED]\n');
    expect(warmSupervisorsOf(r)).toEqual([booted]);
    // A promotable exec ending in time is handed to it too: the usual result, no task left.
    await waitFor(() => isWaitingForTask(booted!), 'it waits again');
    const res = await r.requestExec(
      execRequest('echo "promoted-in-time $PPID $? $LINENO $#"', {
        env: agentEnv(w),
        promote: { task_id: newTaskId(), after_ms: 30_000 },
      }),
    );
    expect(res).toMatchObject({ kind: 'finished', exit_code: 0 });
    // The command's parent (the shell execs it) is its supervisor: the same one, a third time. Its
    // shell runs the prelude too, yet starts as a shell of its own would: `$?` 0 (the prelude's
    // failed oom write is not its status), its first line line 1, no arguments.
    expect(text((res as ExecFinished).stdout_b64)).toBe(`promoted-in-time ${booted} 0 1 0\n`);
    // Without further calls it is retired; the resident goes on.
    await waitFor(() => !isRunning(booted!), 'the idle supervisor retired', 20_000);
    expect(warmSupervisorsOf(r)).toEqual([]);
    expect(isRunning(r.process.pid!)).toBe(true);
    await waitFor(() => readdirSync(join(w.stateDir, 'tasks')).length === 2, "the exec's task removed");
    expect(readdirSync(join(w.stateDir, 'tasks')).sort()).toEqual([first.task_id, task.task_id].sort());
  });

  it('a reused supervisor keeps its status reserve from task to task: moved back unused after each, never written again', async () => {
    const w = world();
    // No boot ahead: every exec goes to the one supervisor the first booted.
    const r = await startResident(w, { SANDBOX_AGENT_WARM_IDLE_MS: '60000', SANDBOX_AGENT_WARM_QUIET_MS: '600000' });
    const run = async (i: number): Promise<void> => {
      const res = await r.requestExec(
        execRequest(`echo run ${i}`, { env: agentEnv(w), promote: { task_id: newTaskId(), after_ms: 30_000 } }),
      );
      expect(res).toMatchObject({ kind: 'finished', exit_code: 0 });
      expect(text((res as ExecFinished).stdout_b64)).toBe(`run ${i}\n`);
    };
    await run(0);
    const sup = await waitFor(() => (warmSupervisorsOf(r).length === 1 ? warmSupervisorsOf(r)[0] : undefined), "the exec's supervisor");
    const reserve = join(w.stateDir, `.warm-${sup!}.reserve`);
    await waitFor(() => isWaitingForTask(sup!) && existsSync(reserve), 'it waits for the next task, its reserve beside the tasks folder');
    // Written once (16 KiB of blanks); a rewrite would change its modification time, a move does not.
    const written = statSync(reserve, { bigint: true });
    expect([written.size, readFileSync(reserve).toString().trim()]).toEqual([16_384n, '']);
    for (let i = 1; i <= 3; i++) {
      await run(i);
      await waitFor(() => isWaitingForTask(sup!) && existsSync(reserve), 'it waits again');
      const now = statSync(reserve, { bigint: true });
      expect([now.ino, now.mtimeNs, now.size]).toEqual([written.ino, written.mtimeNs, 16_384n]);
    }
    expect(warmSupervisorsOf(r)).toEqual([sup]);
    // Each exec's task directory is gone, its reserve with it (moved out, not left behind).
    await waitFor(() => readdirSync(join(w.stateDir, 'tasks')).length === 0, "the execs' tasks removed");
  });

  it('a reused supervisor ignores a stop signal meant for its earlier task, and a cancel of its current one stops it', async () => {
    const w = world();
    const r = await startResident(w, { SANDBOX_AGENT_WARM_QUIET_MS: '600000', SANDBOX_AGENT_WARM_IDLE_MS: '60000' });
    const first = newTaskId();
    await r.requestView(startRequest('true', { task_id: first, env: agentEnv(w) }));
    const sup = await waitFor(() => warmSupervisorsOf(r)[0], "the first start's supervisor");
    await waitFor(() => isWaitingForTask(sup!), 'it waits for the next task');
    const id = await holdOne(r, { env: agentEnv(w) });
    await waitFor(() => readStatusOrNull(w, id)?.group, 'the second command to run');
    expect(readStatusJson(w, id).supervisor).toMatchObject({ pid: sup });
    // A SIGTERM as a cancel of the first task would have sent it, arriving late: the second task goes on.
    process.kill(sup!, 'SIGTERM');
    await new Promise((done) => setTimeout(done, 300));
    expect(readStatusJson(w, id).state).toBe('running');
    // A cancel of the second marks it first: it stops.
    await r.requestView(cancelRequest(id));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'cancelled' });
  });

  it("started without the resident's socket (by hand), starts no process ahead and exits cleanly at the end of its input", () => {
    const w = world();
    const shape = { cwd: '/tmp', env: { PATH: process.env.PATH ?? '/usr/bin:/bin' } };
    // fd 3 is then one of node's own: taking it for the socket closed it under libuv (an abort).
    const run = spawnSync(process.execPath, [AGENT_BUNDLE, 'supervise', '--warm'], {
      env: agentEnv(w),
      input: JSON.stringify({ expect: shape }) + '\n',
      stdio: ['pipe', 'ignore', 'pipe'],
      timeout: 60_000,
    });
    expect([run.status, run.signal]).toEqual([0, null]);
    expect(run.stderr.toString()).toBe('');
  });

  it('after a start whose supervisor stays with its task, boots one ahead only once requests pause for its quiet period', async () => {
    const w = world();
    const r = await startResident(w, { SANDBOX_AGENT_WARM_QUIET_MS: '3000' });
    const holder = await holdOne(r, { env: agentEnv(w) });
    const busy = await waitFor(() => readStatusJson(w, holder).supervisor?.pid, "the start's supervisor");
    const others = () => warmSupervisorsOf(r).filter((pid) => pid !== busy);
    // Requests 200 ms apart for 1.6 s, far longer than a boot takes: each one puts the boot off again.
    for (let i = 0; i < 8; i++) {
      resultOf(await r.request(listRequest()));
      expect(others()).toEqual([]);
      await new Promise((done) => setTimeout(done, 200));
    }
    expect(others()).toEqual([]);
    // Then quiet: it boots.
    await waitFor(() => others()[0], 'a supervisor booted once requests paused');
    await r.requestView(cancelRequest(holder));
  });

  it("starts the command's first process ahead for a start like the last: the command runs in it as it would in a fresh one, and any other start kills it", async () => {
    const w = world();
    const r = await startResident(w, { SANDBOX_AGENT_WARM_IDLE_MS: '60000', SANDBOX_AGENT_WARM_QUIET_MS: '0' });
    const bounds = { processes: 500, open_files: 256, refuse_at: 100_000, oom_score_adj: 500 };
    const promotable = (command: string, env: Record<string, string>, cwd = '/tmp') =>
      exec(r, w, command, { cwd, env, bounds, promote: { task_id: newTaskId(), after_ms: 30_000 } });
    const holders: string[] = [];
    /** A start of this shape that keeps every waiting supervisor busy: one is then booted ahead with the shape's first process started. */
    const bootAhead = async (env: Record<string, string>, known: number[]): Promise<{ sup: number; pending: number }> => {
      for (;;) {
        const id = await holdOne(r, { env, cwd: '/tmp', bounds, stdin: false });
        holders.push(id);
        const sup = readStatusJson(w, id).supervisor?.pid;
        known.push(sup!);
        // Booted ahead once none waits: one still waiting (back from its task) takes the next hold instead.
        const fresh = await waitFor(
          () => warmSupervisorsOf(r).find((pid) => !known.includes(pid)) ?? (warmSupervisorsOf(r).some(isWaitingForTask) ? -1 : undefined),
          'a supervisor booted ahead, or one waiting',
        );
        if (fresh === -1) continue;
        // Started, and known to the resident: a start sent before it knows rightly goes the cold way.
        const pending = await waitFor(() => toldShellOf(fresh!), 'its first process started ahead, the resident told', 20_000).catch(
          unlessTimedOut,
        );
        known.push(fresh!);
        if (pending !== undefined) return { sup: fresh!, pending };
      }
    };
    // Backslashes, quotes, blank and indented lines, a last line without a newline, and bytes past ASCII.
    const script = [
      'printf \'%s|\' "$0" "$#"; echo',
      "cat <<'EOF'",
      '  two  spaces \\ and \\\\ backslashes \\',
      '',
      '\ttab $HOME "q" \'s\' é',
      'EOF',
      'echo "pid $$ in $(pwd)"; ulimit -u; ulimit -n; cat /proc/self/oom_score_adj; readlink /proc/self/fd/0; env | LC_ALL=C sort',
      // No descriptor of the resident's reaches the command (the socket the process started ahead read it from included).
      // Listed by the shell itself (no fork: a pipeline's parent briefly holds the pipe's ends), 3 being the listing's own.
      'cd /proc/$$/fd && echo "fds" *',
      'printf end',
    ].join('\n');
    // The first exec boots a supervisor for itself: no process ahead.
    const cold = await promotable(script, agentEnv(w));
    const known: number[] = [...warmSupervisorsOf(r)];
    const { pending } = await bootAhead(agentEnv(w), known);
    const warm = await promotable(script, agentEnv(w));
    const coldOut = text(cold.stdout_b64);
    const warmOut = text(warm.stdout_b64);
    // The command ran in the process started ahead: the shell it exec'd has its pid.
    expect(warmOut).toContain(`pid ${pending} in /tmp\n`);
    expect(coldOut).not.toContain(`pid ${pending} `);
    // Otherwise byte for byte what the cold way gives: script, bounds, stdin, environment.
    const withoutPid = (out: string) => out.replace(/^pid \d+ /m, 'pid N ');
    expect(withoutPid(warmOut)).toBe(withoutPid(coldOut));
    expect(coldOut).toMatch(/^\/(usr\/)?bin\/bash\|0\|\n/);
    expect(coldOut).toContain('|\n  two  spaces \\ and \\\\ backslashes \\\n\n\ttab $HOME "q" \'s\' é\n');
    expect(coldOut).toContain(`\n500\n256\n${Math.max(500, ownOomScoreAdj())}\n/dev/null\n`);
    expect(coldOut.endsWith('end')).toBe(true);
    expect(coldOut).toMatch(/\nfds 0 1 2 3\n/);
    expect([cold.exit_code, warm.exit_code, text(warm.stderr_b64)]).toEqual([0, 0, '']);
    // A start of another shape (one more variable) gets a fresh process; the one started ahead is killed.
    const next = await bootAhead(agentEnv(w), known);
    const other = await promotable('echo "pid $$ $EXTRA"', agentEnv(w, { EXTRA: 'x' }));
    expect(text(other.stdout_b64)).toMatch(/^pid \d+ x\n$/);
    expect(text(other.stdout_b64)).not.toContain(`pid ${next.pending} `);
    await waitFor(() => !isRunning(next.pending), 'the process started ahead killed');
    // A command that ignores TERM, started in the process started ahead, is cancelled as any other: KILL after the grace.
    const last = await bootAhead(agentEnv(w, { EXTRA: 'x' }), known);
    const id = newTaskId();
    const started = await r.requestView(
      startRequest(`trap '' TERM; echo "ready $$"; while :; do sleep 0.05; done`, {
        task_id: id,
        cwd: '/tmp',
        env: agentEnv(w, { EXTRA: 'x' }),
        bounds,
        stdin: false,
      }),
    );
    expect(started.state).toBe('running');
    await waitFor(() => readStatusOrNull(w, id)?.group, 'the command to run');
    expect(readStatusJson(w, id).group).toMatchObject({ pgid: last.pending });
    await r.requestView(cancelRequest(id));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'cancelled', exit_code: 137, stdout: `ready ${last.pending}\n` });
    // One that died while it waited (killed from inside the sandbox) is not given the next command: that starts the cold way.
    const fourth = await bootAhead(agentEnv(w, { EXTRA: 'x' }), known);
    process.kill(fourth.pending, 'SIGKILL');
    await waitFor(() => !isRunning(fourth.pending), 'the process started ahead killed');
    const afterDeath = await promotable('echo "pid $$ $EXTRA"', agentEnv(w, { EXTRA: 'x' }));
    expect(afterDeath.exit_code).toBe(0);
    expect(text(afterDeath.stdout_b64)).toMatch(/^pid \d+ x\n$/);
    expect(text(afterDeath.stdout_b64)).not.toContain(`pid ${fourth.pending} `);
    for (const holder of holders) await r.requestView(cancelRequest(holder));
  });

  it('a resident killed -9 after handing over a start loses nothing; one still waiting exits with no task', async () => {
    const w = world();
    // Never retired for idleness here, nor booted ahead: only its resident's end can end the waiting one.
    const r = await startResident(w, {
      SANDBOX_AGENT_START_SETTLE_MS: '120000',
      SANDBOX_AGENT_WARM_IDLE_MS: '600000',
      SANDBOX_AGENT_WARM_QUIET_MS: '600000',
    });
    const first = newTaskId();
    await r.requestView(startRequest('true', { task_id: first, env: agentEnv(w) }));
    const booted = await waitFor(() => warmSupervisorsOf(r)[0], "the first start's supervisor");
    await waitFor(() => isWaitingForTask(booted!), 'it waits for the next task');
    const id = newTaskId();
    const answer = r.request(startRequest(burstCommand(60_000, 30, 5), { task_id: id, timeout_s: 120, env: agentEnv(w) }));
    answer.catch(() => {});
    await waitFor(
      () => existsSync(join(taskDirOf(w, id), 'stdout.log')) && readFileSync(join(taskDirOf(w, id), 'stdout.log')).length > 1000,
      'output',
    );
    expect(readStatusJson(w, id).supervisor).toMatchObject({ pid: booted });
    // A promotable exec meanwhile boots a supervisor for itself, which then waits (its task removed).
    const done = await exec(r, w, 'true', { promote: { task_id: newTaskId(), after_ms: 30_000 } });
    expect(done.exit_code).toBe(0);
    const waiting = await waitFor(() => warmSupervisorsOf(r).find((pid) => pid !== booted), "the exec's supervisor");
    await waitFor(() => isWaitingForTask(waiting!), 'it waits for the next task');
    const tasks = () => readdirSync(join(w.stateDir, 'tasks')).sort();
    await waitFor(() => tasks().length === 2, "the exec's task removed");
    expect(tasks()).toEqual([first, id].sort());
    r.process.kill('SIGKILL');
    await expect(answer).rejects.toThrow(/exited/);
    // The one nobody handed a task sees its resident gone and exits, making no task.
    await waitFor(() => !isRunning(waiting!), 'the waiting supervisor exits');
    expect(await waitTerminal(w, id, 120_000)).toMatchObject({ state: 'failed', exit_code: 5 });
    const [out, err] = logs(w, id);
    expect(sha(out!)).toBe(sha(expectedBurst(60_000, 'o')));
    expect(sha(err!)).toBe(sha(expectedBurst(60_000, 'e')));
    expect(tasks()).toEqual([first, id].sort());
    // Its task over, the supervisor of the burst finds its resident gone and exits too.
    await waitFor(() => !isRunning(booted!), "the burst's supervisor exits");
  });
});

/** Inodes of the TCP sockets `pid` listens on (what an inspector opened by SIGUSR1 would be). */
function listeningInodes(pid: number): string[] {
  const listening = new Set<string>();
  for (const table of ['tcp', 'tcp6']) {
    for (const line of readFileSync(`/proc/${pid}/net/${table}`, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A') listening.add(f[9]!);
    }
  }
  const own = readdirSync(`/proc/${pid}/fd`).map((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      return '';
    }
  });
  return own.map((l) => /^socket:\[(\d+)\]$/.exec(l)?.[1]).filter((i): i is string => i !== undefined && listening.has(i));
}

describe('SIGUSR1', () => {
  it("opens no inspector in the resident or in a task's supervisor: both keep working", async () => {
    const w = world();
    const r = await startResident(w);
    const task = await r.requestView(startRequest('sleep 2; echo late', { env: agentEnv(w) }));
    const supervisor = await waitFor(() => readStatusJson(w, task.task_id).supervisor?.pid, "the task's supervisor");
    for (const pid of [r.process.pid!, supervisor]) for (let i = 0; i < 3; i++) process.kill(pid, 'SIGUSR1');
    // A resident that still answers has handled the signals; an inspector would be listening by then.
    expect(resultOf(await r.request(helloRequest()))).toMatchObject({ protocol: 1 });
    for (const pid of [r.process.pid!, supervisor]) expect(listeningInodes(pid), `pid ${pid}`).toEqual([]);
    expect(await waitTerminal(w, task.task_id)).toMatchObject({ state: 'succeeded', stdout: 'late\n' });
  });
});

describe('a resident killed -9 loses nothing', () => {
  for (const when of ['while it runs a start', 'during an exec window'] as const) {
    it(`${when}: the command goes on as a task, with every byte and its exit code`, async () => {
      const secret = `tok-${newTaskId()}`;
      const w = world();
      // A settle window long enough for the kill to land while the resident still waits on the start.
      const r = await startResident(w, { SANDBOX_AGENT_START_SETTLE_MS: '120000' });
      const id = newTaskId();
      const command = burstCommand(60_000, 30, 5, 'API_TOKEN');
      const env = agentEnv(w, { API_TOKEN: secret });
      const answer =
        when === 'while it runs a start'
          ? r.request(startRequest(command, { task_id: id, env, timeout_s: 120 }))
          : r.request(execRequest(command, { env, timeout_ms: 120_000, promote: { task_id: id, after_ms: 120_000 } }));
      answer.catch(() => {});
      // Some output is in the logs while the call still waits.
      await waitFor(
        () => existsSync(join(taskDirOf(w, id), 'stdout.log')) && readFileSync(join(taskDirOf(w, id), 'stdout.log')).length > 1000,
        'output',
      );
      // The task's own supervisor reads the output, from the first byte: the resident never does.
      expect(readStatusJson(w, id).supervisor).not.toBeNull();
      r.process.kill('SIGKILL');
      await expect(answer).rejects.toThrow(/exited/);
      const view = await waitTerminal(w, id, 120_000);
      expect(view).toMatchObject({ state: 'failed', exit_code: 5 });
      const [out, err] = logs(w, id);
      expect(sha(out!)).toBe(sha(expectedBurst(60_000, 'o')));
      expect(sha(err!)).toBe(sha(expectedBurst(60_000, 'e') + 'secret [MASKED]\n'));
    });
  }
});

describe('tasks the resident runs, from other processes', () => {
  it('cancel: through the resident, and from a per-call agent, while the resident waits on the task; both tasks stay', async () => {
    const w = world();
    const r = await startResident(w);
    const a = newTaskId();
    const b = newTaskId();
    // Promotable execs with long windows: the resident waits on them throughout.
    for (const id of [a, b]) {
      r.send(
        execRequest('sleep 60', {
          env: agentEnv(w),
          timeout_ms: 120_000,
          max_output_bytes: 100,
          promote: { task_id: id, after_ms: 60_000 },
        }),
      ).answer.catch(() => {});
    }
    await waitFor(() => [a, b].every((id) => readStatusOrNull(w, id)?.group), 'both commands to run');
    expect((await r.requestView(cancelRequest(a))).state).toBe('cancelled');
    const fromAfar = await callView(w, cancelRequest(b));
    expect(fromAfar.state).toBe('cancelled');
    // Whoever cancelled learnt the id: the resident removes neither task once its call answers.
    const hello = await r.request(helloRequest());
    expect(hello.ok).toBe(true);
    for (const id of [a, b]) expect(readStatusJson(w, id)).toMatchObject({ state: 'cancelled' });
  });

  it('input: to a task the resident started, written by a per-call agent; eof ends cat after the resident is gone', async () => {
    const w = world();
    const r = await startResident(w);
    const view = await r.requestView(startRequest('cat', { env: agentEnv(w) }));
    const id = view.task_id;
    const input = async (data: string, eof: boolean) => resultOf(await call(w, inputRequest(id, data, { eof })));
    expect(resultOf(await r.request(inputRequest(id, 'one\n')))).toMatchObject({ bytes_written: 4 });
    await r.close();
    expect(await input('two\n', false)).toMatchObject({ bytes_written: 4, stdin_closed: false });
    expect(await input('three\n', true)).toMatchObject({ bytes_written: 6, stdin_closed: true });
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: 'one\ntwo\nthree\n' });
  });

  it('a resident that stops (end of its input) leaves a promotable exec running as a task', async () => {
    const w = world();
    const r = await startResident(w);
    const id = newTaskId();
    const answer = r.request(
      execRequest('sleep 1; echo later', { env: agentEnv(w), max_output_bytes: 100, promote: { task_id: id, after_ms: 60_000 } }),
    );
    answer.catch(() => {});
    await waitFor(() => readStatusOrNull(w, id)?.group, 'the command to run');
    await r.close();
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: 'later\n' });
  });
});

function readStatusOrNull(w: AgentWorld, id: string): { group: unknown; supervisor: unknown } | null {
  try {
    return readStatusJson(w, id);
  } catch {
    return null;
  }
}

function ownOomScoreAdj(): number {
  return Number(readFileSync('/proc/self/oom_score_adj', 'utf8').trim());
}

export type { TaskView };
