// The task walk over stdio with real local sandboxes: a task outlives its MCP session and its
// server process, and a NEW server process reads, cancels and cleans up.
import { describe, expect, it } from 'vitest';
import { localServers, ok, toolError } from '../support/built-server.js';
import { waitFor } from '../support/wait.js';

const servers = localServers();

describe('reconnectable tasks through MCP', () => {
  it('survives disconnect and server restart: BEFORE, then BEFORE…AFTER, succeeded, saved outcome on cancel, cleanup', async () => {
    const first = await servers.connect();
    const sandbox = await ok(first.client, 'create_sandbox', { timeout: 600 });
    expect(sandbox.sandbox_id).toMatch(/^local:/);
    // The seeds' `printf BEFORE; sleep 10; printf AFTER`, with the 10 s replaced by a file this test
    // creates once it has read BEFORE from the new server: a loaded machine can take longer than
    // 10 s to end this server, start the next and read, and the task must still be running then.
    const started = await ok(first.client, 'start_task', {
      command: 'printf BEFORE; until [ -e go ]; do sleep 0.1; done; printf AFTER',
      timeout: 120,
    });
    expect(started.task_id).toMatch(/^[0-9a-f]{32}$/);
    expect(started.sandbox_id).toBe(sandbox.sandbox_id);
    expect(['running', 'succeeded']).toContain(started.state);
    await first.close(); // EOF: the server exits; the sandbox is retained because of the task

    const second = await servers.connect();
    const handle = { sandbox_id: sandbox.sandbox_id, task_id: started.task_id };
    const info = await ok(second.client, 'get_sandbox', { sandbox_id: sandbox.sandbox_id });
    expect(info.status).toBe('running');

    // Wait for BEFORE with the long poll rather than a loop of sleeps.
    let page = await ok(second.client, 'get_task', { ...handle, wait: 5 });
    await waitFor(async () => {
      if (page.stdout.includes('BEFORE')) return true;
      page = await ok(second.client, 'get_task', { ...handle, wait: 5 });
      return page.stdout.includes('BEFORE');
    }, 'BEFORE in the task output');
    expect(page.stdout).toBe('BEFORE');
    expect(page.state).toBe('running');
    expect(page.stdout_next_offset).toBe(6);
    await ok(second.client, 'write_file', { sandbox_id: sandbox.sandbox_id, path: 'go', content: '' });

    // Read on from the returned offset until the state changes.
    let next = page;
    await waitFor(
      async () => {
        next = await ok(second.client, 'get_task', { ...handle, stdout_offset: page.stdout_next_offset, wait: 15 });
        return next.state !== 'running';
      },
      'the task to finish',
      60_000,
    );
    expect(next.state).toBe('succeeded');
    expect(next.exit_code).toBe(0);
    expect(next.stdout).toBe('AFTER');
    expect(next.stdout_size).toBe(11);
    expect(typeof next.started_at).toBe('number');
    expect(next.finished_at).toBeGreaterThanOrEqual(next.started_at);

    const replay = await ok(second.client, 'get_task', handle);
    expect(replay.stdout).toBe('BEFOREAFTER');

    const cancelled = await ok(second.client, 'cancel_task', handle);
    expect(cancelled.state).toBe('succeeded');
    expect(cancelled.exit_code).toBe(0);

    const killed = await ok(second.client, 'kill_sandbox', { sandbox_id: sandbox.sandbox_id });
    expect(killed).toEqual({ success: true, sandbox_id: sandbox.sandbox_id, destroyed: true });
    const gone = await toolError(second.client, 'get_sandbox', { sandbox_id: sandbox.sandbox_id });
    expect(gone.category).toBe('not_found');
  });

  it('kills a session sandbox without tasks at EOF, and retains one with a task', async () => {
    const s = await servers.connect();
    const plain = await ok(s.client, 'create_sandbox', {});
    const withTask = await ok(s.client, 'create_sandbox', {});
    await ok(s.client, 'start_task', { sandbox_id: withTask.sandbox_id, command: 'sleep 300' });
    await s.close();

    const t = await servers.connect();
    expect((await toolError(t.client, 'get_sandbox', { sandbox_id: plain.sandbox_id })).category).toBe('not_found');
    expect((await ok(t.client, 'get_sandbox', { sandbox_id: withTask.sandbox_id })).status).toBe('running');
    await ok(t.client, 'kill_sandbox', { sandbox_id: withTask.sandbox_id });
  });

  it('cancels a running task: cancelled, and its whole process group is gone', async () => {
    const s = await servers.connect();
    const sb = await ok(s.client, 'create_sandbox', {});
    // A shell with two same-group children.
    // (Distinct durations: the sandbox's own pid 1 runs a `sleep` of its own.)
    const task = await ok(s.client, 'start_task', { command: 'sleep 1001 & sleep 1002; wait' });
    const handle = { sandbox_id: sb.sandbox_id, task_id: task.task_id };
    await waitFor(async () => {
      // -x: the whole command line, so the task's own shell (whose line names both) is not counted.
      const ps = await ok(s.client, 'run_command', { command: "pgrep -c -xf 'sleep 100[12]' || true" });
      return ps.stdout.trim() === '2';
    }, 'both sleeps to run');

    // An offset past a stream's end (nothing printed: 0 bytes) is refused, naming the field, at
    // once for a waiting get; a cancel refused for it stops nothing.
    const pastEnd = (stream: 'stdout' | 'stderr') => ({
      category: 'invalid_argument',
      code: 'invalid_request',
      suggestion: `\`${stream}_offset\` is past the end of ${stream} (0 bytes so far): pass a previous ${stream}_next_offset`,
    });
    expect(await toolError(s.client, 'get_task', { ...handle, stdout_offset: 1000, wait: 30 })).toMatchObject(pastEnd('stdout'));
    const refused = await toolError(s.client, 'cancel_task', { ...handle, stderr_offset: 1000 });
    expect(refused).toMatchObject(pastEnd('stderr'));
    expect(refused.text).not.toContain('1000');
    expect((await ok(s.client, 'get_task', handle)).state).toBe('running');

    const cancelled = await ok(s.client, 'cancel_task', handle);
    expect(cancelled.state).toBe('cancelled');
    const ps = await ok(s.client, 'run_command', { command: "pgrep -f 'sleep 100[12]' || echo none" });
    expect(ps.stdout.trim()).toBe('none');
    // Cancelling again returns the saved outcome.
    expect((await ok(s.client, 'cancel_task', handle)).state).toBe('cancelled');
    await ok(s.client, 'kill_sandbox', {});
  });

  // A waiting get_task on a task that never ends answers on the new output (or the state change),
  // not at the end of its 30 s. The bound is the sandbox's own clock: what a task prints 8 s
  // after the trigger must not be in the reply yet. A get that waited its whole `wait` would
  // carry it, and no wall-clock figure is asserted.
  it('a waiting get_task (wait: 30) answers within a bound of new output or of a state change', async () => {
    const s = await servers.connect();
    const sb = await ok(s.client, 'create_sandbox', { timeout: 300 });
    const at = (task: Record<string, any>) => ({ sandbox_id: sb.sandbox_id, task_id: task.task_id as string });
    const after = (file: string, then: string) => `until [ -e ${file} ]; do sleep 0.05; done; ${then}`;
    // While a get waits, the agent watches the task directory: a per-call agent is a process in the
    // sandbox, the resident holds an inotify watch ([.]cj[s]: the probe's own line does not match).
    const probe =
      "{ ps -eo args | grep '[.]cj[s] call'; for p in $(pgrep -f '[.]cj[s] serve'); do cat /proc/$p/fdinfo/* 2>/dev/null | grep '^inotify wd'; done; } | wc -l";
    // background_after 0: a promotable probe would be a task the resident watches too.
    const isWaiting = async () => (await ok(s.client, 'run_command', { command: probe, background_after: 0 })).stdout.trim() === '1';

    const talker = at(await ok(s.client, 'start_task', { command: after('go1', 'echo one; sleep 8; echo two; sleep 1000') }));
    const reply = ok(s.client, 'get_task', { ...talker, wait: 30 });
    await waitFor(isWaiting, 'the get to wait in the sandbox');
    await ok(s.client, 'write_file', { path: 'go1', content: '' });
    expect(await reply).toMatchObject({ state: 'running', stdout: 'one\n', stdout_next_offset: 4 });

    const ender = at(await ok(s.client, 'start_task', { command: after('go2', 'exit 3') }));
    const clock = at(await ok(s.client, 'start_task', { command: after('go2', 'sleep 8; echo late; sleep 1000') }));
    const ended = ok(s.client, 'get_task', { ...ender, wait: 30 });
    await waitFor(isWaiting, 'the get to wait in the sandbox');
    await ok(s.client, 'write_file', { path: 'go2', content: '' });
    expect(await ended).toMatchObject({ state: 'failed', exit_code: 3, stdout: '' });
    expect(await ok(s.client, 'get_task', clock)).toMatchObject({ state: 'running', stdout: '' });
    await ok(s.client, 'kill_sandbox', {});
  });

  it('reports a nonzero exit as task data, not a tool error', async () => {
    const s = await servers.connect();
    const sb = await ok(s.client, 'create_sandbox', {});
    const task = await ok(s.client, 'start_task', { command: 'echo oops >&2; exit 3' });
    let view = task;
    await waitFor(async () => {
      view = await ok(s.client, 'get_task', { sandbox_id: sb.sandbox_id, task_id: task.task_id, wait: 5 });
      return view.state !== 'running';
    }, 'the task to finish');
    expect(view.state).toBe('failed');
    expect(view.exit_code).toBe(3);
    expect(view.stderr).toBe('oops\n');
    // Exactly at the end: an empty page, the next offset unchanged. One byte past it: refused.
    const handle = { sandbox_id: sb.sandbox_id, task_id: task.task_id };
    expect(await ok(s.client, 'get_task', { ...handle, stderr_offset: 5 })).toMatchObject({
      stderr: '',
      stderr_next_offset: 5,
      stderr_size: 5,
    });
    expect(await toolError(s.client, 'get_task', { ...handle, stderr_offset: 6 })).toMatchObject({
      category: 'invalid_argument',
      suggestion: '`stderr_offset` is past the end of stderr (5 bytes so far): pass a previous stderr_next_offset',
    });
    await ok(s.client, 'kill_sandbox', {});
  });
});
