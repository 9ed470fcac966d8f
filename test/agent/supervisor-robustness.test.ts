// The supervisor under adverse conditions: an event loop stalled past the cleanup deadline, a
// full state directory, and the OOM killer's choice between the command and the supervisor.
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { TaskStatusSchema } from '../../shared/status.js';
import { cancelRequest, getRequest, inputRequest, startRequest } from '../support/agent-requests.js';
import {
  type AgentWorld,
  call,
  callView,
  newTaskId,
  readStatusJson,
  startTask,
  taskDirOf,
  waitTerminal,
  worldsPerTest,
} from '../support/agent-world.js';
import { fixture } from '../support/paths.js';
import { requireBuild } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { sleep, waitFor } from '../support/wait.js';
import { isRootOrSkipping } from '../support/prerequisites.js';

beforeAll(() => requireBuild());

const { world, strays } = worldsPerTest();

describe('a stalled supervisor', () => {
  it('still KILLs a TERM-ignoring group member when its event loop stalls past the cleanup deadline', async () => {
    const graceMs = 3000;
    const w = world({ SANDBOX_AGENT_GRACE_MS: String(graceMs) });
    // The leader exits once told by a file (not after a fixed time: the test must stop the supervisor
    // within the grace period after that, however slow its agent calls), leaving one member that
    // obeys TERM and one that ignores it.
    const go = join(w.home, 'leader-may-exit');
    const { task_id: id } = await startTask(
      w,
      `${fixture('ignore-sigterm.sh')} & echo $!; sleep 300 & echo $!; until [ -e ${go} ]; do sleep 0.05; done`,
    );
    const [stubborn, obedient] = await waitFor(async () => {
      const v = await callView(w, getRequest(id, { wait_s: 1 }));
      const pids = v.stdout.match(/^\d+$/gm)?.map(Number) ?? [];
      return pids.length === 2 ? pids : null;
    }, 'both member pids');
    strays.push(stubborn!, obedient!);
    const supervisor = readStatusJson(w, id).supervisor!.pid;
    writeFileSync(go, '');
    // The obedient member's death shows the supervisor's TERM went out and its KILL is pending.
    await waitFor(() => !isRunning(obedient!), 'the TERM to the group', 20_000, 5);
    // A stopped process is the purest stall: when it continues, every timer is due at once,
    // the cleanup loop's short sleep first, and the loop finds its deadline passed.
    process.kill(supervisor, 'SIGSTOP');
    try {
      await sleep(graceMs + 1000 + 700);
    } finally {
      process.kill(supervisor, 'SIGCONT');
    }
    expect(await waitTerminal(w, id)).toMatchObject({ state: 'succeeded', exit_code: 0 });
    await waitFor(() => !isRunning(stubborn!), 'the TERM-ignoring member to be killed');
  });
});

describe('the OOM killer', () => {
  const scoreOf = (pid: number | 'self') => Number(readFileSync(`/proc/${pid}/oom_score_adj`, 'utf8'));

  it("prefers the command: it raises its own oom_score_adj before it runs, the supervisor's stays as inherited", async () => {
    const w = world();
    const { task_id: id } = await startTask(w, 'cat /proc/self/oom_score_adj; sleep 300');
    const inherited = scoreOf('self');
    const expected = Math.max(500, inherited);
    await waitFor(async () => (await callView(w, getRequest(id, { wait_s: 1 }))).stdout !== '', 'the score line');
    const status = readStatusJson(w, id);
    // The shell that leads the group, and a process it started.
    expect(scoreOf(status.group!.pgid)).toBe(expected);
    expect((await callView(w, getRequest(id))).stdout).toBe(`${expected}\n`);
    expect(scoreOf(status.supervisor!.pid)).toBe(inherited);
    await callView(w, cancelRequest(id));
  });
});

// A state directory on a tiny tmpfs of its own. Mounting needs root: tests run as root here and
// in CI; elsewhere (not CI) these tests are skipped, in CI a missing privilege is a failure.
describe.runIf(isRootOrSkipping('the disk-full tests (they mount a tmpfs)'))('a full state directory', () => {
  const mounts: string[] = [];
  afterEach(() => {
    // Lazy: a supervisor still holding a file there is killed by the world's own clean-up.
    for (const m of mounts.splice(0)) execFileSync('umount', ['-l', m]);
  });

  /** A world whose state directory is a fresh tmpfs of `sizeKb`. */
  function worldOnTmpfs(sizeKb: number, env: Record<string, string> = {}): AgentWorld {
    const w = world(env);
    mkdirSync(w.stateDir, { mode: 0o700 });
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKb}k,mode=0700`, 'tmpfs', w.stateDir]);
    mounts.push(w.stateDir);
    return w;
  }

  /** Fills the filesystem at `dir` to the last byte (bounded by its size); returns the filler's path. */
  function fillUp(dir: string): string {
    const path = join(dir, 'filler');
    const fd = openSync(path, 'a');
    try {
      for (const size of [65536, 4096, 512, 1]) {
        const chunk = Buffer.alloc(size, 0x66);
        for (let i = 0; i < 1_000_000; i++) {
          try {
            writeSync(fd, chunk);
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
            throw err;
          }
        }
      }
    } finally {
      closeSync(fd);
    }
    return path;
  }

  it('records the true exit code when the task fills the disk itself: logs cut short and marked, status written', async () => {
    const w = worldOnTmpfs(512);
    const cmd = `printf before; head -c ${2 * 1024 * 1024} /dev/zero | tr '\\0' x; echo after >&2; exit 3`;
    const { task_id: id } = await startTask(w, cmd);
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'failed', exit_code: 3, stdout_truncated: true, error: { code: 'state_dir_full' } });
    expect(view.stdout.startsWith('beforexxx')).toBe(true);
    expect(view.stdout_size).toBeLessThan(512 * 1024);
    // The status is whole, the reserve spent, nothing half-written left beside it.
    const dir = taskDirOf(w, id);
    expect(TaskStatusSchema.safeParse(JSON.parse(readFileSync(join(dir, 'status.json'), 'utf8'))).success).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['request.json', 'status.json', 'stderr.log', 'stdout.log']);
  });

  it('keeps the reserve for the final status while the command writes beside the logs until the disk is full', async () => {
    const w = worldOnTmpfs(512);
    const filler = join(w.stateDir, 'filler');
    // Once `start` is in the log, its page has room for the last line: only the status needs new space.
    const logged = `until [ -s ${w.stateDir}/tasks/*/stdout.log ]; do sleep 0.01; done`;
    const cmd = `echo start; ${logged}; head -c ${2 * 1024 * 1024} /dev/zero 2>/dev/null > ${filler}; echo "wrote: $?"; exit 0`;
    const { task_id: id } = await startTask(w, cmd);
    const view = await waitTerminal(w, id);
    // head failed with ENOSPC, the shell carried on and succeeded; the status still got written.
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'start\nwrote: 1\n' });
    expect(view.error).toBeUndefined();
    expect(existsSync(join(taskDirOf(w, id), 'status.reserve'))).toBe(false);
  });

  it('answers state_dir_full to start on a full disk, leaving no task directory behind', async () => {
    const w = worldOnTmpfs(256);
    mkdirSync(join(w.stateDir, 'tasks'), { mode: 0o700 });
    fillUp(w.stateDir);
    const id = newTaskId();
    const res = await call(w, startRequest('echo never', { task_id: id }));
    expect(res).toMatchObject({ ok: false, error: { code: 'state_dir_full', message: expect.stringContaining('full') } });
    expect(existsSync(taskDirOf(w, id))).toBe(false);
  });

  it('where the final status truly cannot be written, reads unknown saying the state directory is full, not killed', async () => {
    const w = worldOnTmpfs(256);
    const { task_id: id } = await startTask(w, 'read x; exit 5');
    const filler = fillUp(w.stateDir);
    // Without its reserve, nothing can hold the final status (white box: the reserve's file name).
    rmSync(join(taskDirOf(w, id), 'status.reserve'));
    fillUp(w.stateDir);
    // Input needs no disk: the task ends now, and its supervisor finds no room for the outcome.
    expect(await call(w, inputRequest(id, 'go\n'))).toMatchObject({ ok: true });
    const view = await waitTerminal(w, id);
    expect(view).toMatchObject({ state: 'unknown', error: { code: 'state_dir_full', message: expect.stringContaining('full') } });
    expect(view.error!.message).not.toContain('killed');
    expect(existsSync(filler)).toBe(true);
  });
});
