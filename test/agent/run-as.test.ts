// Protocol minors 8 and 9, through the built agent as separate processes: a per-call `start` run
// with RUN_AS_ENV, and the resident's `exec` (plain and promotable) and `start` with `run_as`,
// start the command as those ids (an image's user), while the agent and the supervisor stay the
// agent's own (root here); the variable reaches neither; a malformed value is refused, naming it.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUN_AS_ENV, RUN_AS_MINOR, type ExecResult } from '../../shared/protocol.js';
import { cancelRequest, execRequest, startRequest, type ExecFields } from '../support/agent-requests.js';
import { agentEnv, call, callView, newTaskId, taskDirOf, waitTerminal, worldsPerTest, type AgentWorld } from '../support/agent-world.js';
import { requireBuild } from '../support/prerequisites.js';
import { removeAtEnd } from '../support/scratch.js';
import { isRunning } from '../support/processes.js';
import { isWaitingForTask, startResident, toldShellOf, warmSupervisorsOf, type Resident } from '../support/resident-world.js';
import { unlessTimedOut, waitFor } from '../support/wait.js';

beforeAll(() => requireBuild());

const { world } = worldsPerTest();
const isRoot = process.geteuid?.() === 0;

describe('run as (RUN_AS_ENV)', () => {
  it.skipIf(!isRoot)("starts the command as the ids it names, none of root's, the supervisor staying root", async () => {
    const w = world({ [RUN_AS_ENV]: '65534:65533' });
    const { task_id: id } = await callView(
      w,
      startRequest(
        `id -u; id -g; id -G; grep CapEff /proc/self/status; env | grep -c ${RUN_AS_ENV} || true; cat /proc/$PPID/status | grep -c '^Uid:.0' || true`,
        { cwd: '/' },
      ),
    );
    expect(await waitTerminal(w, id)).toMatchObject({
      state: 'succeeded',
      // No variable left; its parent, the supervisor, is root.
      stdout: '65534\n65533\n65533\nCapEff:\t0000000000000000\n0\n1\n',
    });
    expect(readFileSync(join(taskDirOf(w, id), 'request.json'), 'utf8')).toContain('"run_as":{"uid":65534,"gid":65533}');
  });

  it('refuses a value that is not UID:GID, and starts nothing', async () => {
    for (const value of ['', 'app', '1000', '-1:0', '1000:1000:1']) {
      const w = world({ [RUN_AS_ENV]: value });
      const r = await call(w, startRequest('true'));
      expect(r.ok ? null : r.error).toMatchObject({ code: 'invalid_request', message: `${RUN_AS_ENV} must be UID:GID` });
    }
  });
});

describe("the resident's run_as (minor 9)", () => {
  const USER = { uid: 65534, gid: 65533 };
  /** Its ids, groups and capabilities, and whether its parent (the resident or the supervisor) is root. */
  const WHO = `id -u; id -g; id -G; grep CapEff /proc/self/status; grep -c '^Uid:.0' /proc/$PPID/status`;
  const WHO_USER = '65534\n65533\n65533\nCapEff:\t0000000000000000\n1\n';
  const text = (b64: string) => Buffer.from(b64, 'base64').toString('utf8');
  const execOf = (r: Resident, w: AgentWorld, command: string, extra: ExecFields = {}) =>
    r.requestExec(execRequest(command, { env: agentEnv(w), cwd: '/tmp', ...extra }));
  const stdoutOf = (res: ExecResult): string => {
    if (res.kind !== 'finished') throw new Error('promoted');
    return text(res.stdout_b64);
  };

  it.skipIf(!isRoot)('plain and promotable execs, promoted ones and starts run as its ids; without it, as the resident', async () => {
    const w = world();
    const r = await startResident(w);
    expect(r.hello.protocol_minor).toBeGreaterThanOrEqual(RUN_AS_MINOR);
    // A plain exec (the resident reads it), and one without run_as: root's.
    expect(stdoutOf(await execOf(r, w, WHO, { run_as: USER }))).toBe(WHO_USER);
    expect(stdoutOf(await execOf(r, w, 'id -u'))).toBe('0\n');
    // A promotable exec that ends in time (under a supervisor), and one promoted to a task.
    expect(stdoutOf(await execOf(r, w, WHO, { run_as: USER, promote: { task_id: newTaskId(), after_ms: 30_000 } }))).toBe(WHO_USER);
    const promotedId = newTaskId();
    // It goes on once the test has seen it promoted (a file its ids can see, in the run's 1777 temp
    // folder), not after a fixed time that a loaded machine's start could spend before the window.
    const go = removeAtEnd(join(tmpdir(), `run-as-go-${promotedId}`));
    const promoted = await execOf(r, w, `until [ -e ${go} ]; do sleep 0.05; done; ${WHO}`, {
      run_as: USER,
      promote: { task_id: promotedId, after_ms: 0 },
    });
    expect(promoted.kind).toBe('promoted');
    writeFileSync(go, '');
    expect(await waitTerminal(w, promotedId)).toMatchObject({ state: 'succeeded', stdout: WHO_USER });
    expect(readFileSync(join(taskDirOf(w, promotedId), 'request.json'), 'utf8')).toContain('"run_as":{"uid":65534,"gid":65533}');
    // A start (as start_task's), its supervisor root and owning the task's files.
    const { task_id: id } = await r.requestView(startRequest(WHO, { cwd: '/tmp', env: agentEnv(w), run_as: USER }));
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', stdout: WHO_USER });
    // A cwd its ids may not enter (the world's home: root's, 0700) is not found for them, as their shell's cd would say.
    const closed = await r.request(
      execRequest('true', { env: agentEnv(w), cwd: w.home, timeout_ms: 5000, max_output_bytes: 10, run_as: USER }),
    );
    expect(closed.ok ? null : closed.error).toMatchObject({ code: 'cwd_not_found', message: expect.stringContaining('`cwd`') });
    await r.close();
  });

  it.skipIf(!isRoot)("never gives a user's command a shell started ahead for root, nor root's one started for the user", async () => {
    const w = world();
    const r = await startResident(w, { SANDBOX_AGENT_WARM_IDLE_MS: '60000', SANDBOX_AGENT_WARM_QUIET_MS: '0' });
    const uidOf = (pid: number): string => /^Uid:\t(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!;
    const known: number[] = [];
    const holders: string[] = [];
    /** Starts of this shape keep every waiting supervisor busy until one is booted ahead, its first process started for the shape. */
    const bootAhead = async (runAs: typeof USER | undefined): Promise<number> => {
      for (;;) {
        const held = await r.requestView(
          startRequest('sleep 600', { cwd: '/tmp', env: agentEnv(w), stdin: false, ...(runAs ? { run_as: runAs } : {}) }),
        );
        holders.push(held.task_id);
        known.push(...warmSupervisorsOf(r).filter((pid) => !isWaitingForTask(pid)));
        const fresh = await waitFor(
          () => warmSupervisorsOf(r).find((pid) => !known.includes(pid)) ?? (warmSupervisorsOf(r).some(isWaitingForTask) ? -1 : undefined),
          'a supervisor booted ahead, or one waiting',
        );
        if (fresh === -1) continue;
        known.push(fresh!);
        // Started, and known to the resident: a start sent before it knows rightly goes the cold way.
        const pending = await waitFor(() => toldShellOf(fresh!), 'its first process started ahead, the resident told', 20_000).catch(
          unlessTimedOut,
        );
        if (pending !== undefined) return pending;
      }
    };
    const promotable = (command: string, runAs?: typeof USER) =>
      execOf(r, w, command, { promote: { task_id: newTaskId(), after_ms: 30_000 }, ...(runAs ? { run_as: runAs } : {}) });

    // Started ahead for the user (as the user), given to the user's next command of that shape.
    const forUser = await bootAhead(USER);
    expect(uidOf(forUser)).toBe('65534');
    expect(stdoutOf(await promotable('echo $$; id -u', USER))).toBe(`${forUser}\n65534\n`);
    // Started ahead for the user: a command of root's of the same shape gets a fresh shell, as root; the one ahead goes.
    const forUserAgain = await bootAhead(USER);
    const rootOut = stdoutOf(await promotable('echo $$; id -u'));
    expect(rootOut).toMatch(/^\d+\n0\n$/);
    expect(rootOut).not.toContain(`${forUserAgain}\n`);
    await waitFor(() => !isRunning(forUserAgain), 'the process started ahead killed');
    // Started ahead for root: the user's command of that shape gets a fresh one, as the user.
    const forRoot = await bootAhead(undefined);
    expect(uidOf(forRoot)).toBe('0');
    const userOut = stdoutOf(await promotable('echo $$; id -u', USER));
    expect(userOut).toMatch(/^\d+\n65534\n$/);
    expect(userOut).not.toContain(`${forRoot}\n`);
    for (const id of holders) await r.requestView(cancelRequest(id));
    await r.close();
  });

  it('refuses a malformed run_as naming the field, and runs nothing', async () => {
    const w = world();
    const r = await startResident(w);
    const marker = join(w.home, 'ran');
    const cases: [unknown, string][] = [
      [{ uid: -1, gid: 0 }, 'field `run_as.uid` is too small (minimum 0)'],
      [{ uid: 1000, gid: 2 ** 32 }, 'field `run_as.gid` is too large (maximum 4294967294)'],
      [{ uid: 1.5, gid: 0 }, 'field `run_as.uid` must be an integer'],
      [{ uid: 1000 }, 'field `run_as.gid` is required'],
      ['1000:1000', 'field `run_as` must be an object'],
      [{ uid: 1000, gid: 1000, groups: [0] }, 'unexpected field `groups`'],
    ];
    for (const [runAs, message] of cases) {
      for (const request of [
        { ...execRequest(`touch ${marker}`, { env: agentEnv(w), timeout_ms: 5000, max_output_bytes: 10 }), run_as: runAs },
        { ...startRequest(`touch ${marker}`, { env: agentEnv(w) }), run_as: runAs },
      ]) {
        const res = await r.request(request);
        expect(res.ok ? null : res.error).toEqual({ code: 'invalid_request', message });
        // A per-call start too.
        if (request.op === 'start') {
          const perCall = await call(w, request as never);
          expect(perCall.ok ? null : perCall.error).toEqual({ code: 'invalid_request', message });
        }
      }
    }
    await new Promise((done) => setTimeout(done, 300));
    expect(existsSync(marker)).toBe(false);
    // A per-call start whose run_as and RUN_AS_ENV disagree is refused too.
    const both = await call(world({ [RUN_AS_ENV]: '65534:65533' }), startRequest('true', { run_as: { uid: 65534, gid: 0 } }));
    expect(both.ok ? null : both.error).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('`run_as`') });
    await r.close();
  });
});
