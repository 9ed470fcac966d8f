// stop_processes through the built server: every kind of leftover a command can leave ends (in
// the background, nohup, its own session, stopped, ignoring TERM, orphaned to pid 1), while a task
// and the children in its process group go on. (A nested pid namespace needs a user namespace of
// its own, which no sandbox may make: local/templates.)
import { describe, expect, it } from 'vitest';
import { localServer, ok } from '../support/built-server.js';
import { waitFor } from '../support/wait.js';

const s = localServer();

describe('stop_processes', () => {
  it("ends every leftover of a command, whatever it did to escape, and keeps the task's whole process group", async () => {
    const sb = await ok(s.client, 'create_sandbox', { timeout: 300 });
    const run = async (command: string) => (await ok(s.client, 'run_command', { command })).stdout as string;
    // Distinct durations name each process (pid 1 runs a `sleep 86400` of its own).
    const task = await ok(s.client, 'start_task', { command: 'sleep 1001 & sleep 1002; wait' });
    const leftovers = [
      'sleep 2001 >/dev/null 2>&1 &',
      'nohup sleep 2002 >/dev/null 2>&1 &',
      'setsid sleep 2003 >/dev/null 2>&1 &',
      // Stopped below, by a later command: see there.
      'sleep 2004 >/dev/null 2>&1 &',
      'bash -c \'trap "" TERM; sleep 2005; sleep 2005\' >/dev/null 2>&1 &',
      // Orphaned: its parent shell exits at once, so pid 1 inherits it.
      "sh -c 'sleep 2006 >/dev/null 2>&1 &'",
    ];
    for (const command of leftovers) await run(command);
    // Stopped only now that its command has ended: when a command's shell exits, its leftovers'
    // process group becomes orphaned (their parent is now pid 1, of another session), and POSIX
    // has the kernel send such a group SIGHUP then SIGCONT if a member is stopped, so a leftover
    // stopped inside its own command dies as its command ends. Nothing re-checks the group later.
    await run("kill -STOP $(pgrep -xf 'sleep 2004')");
    const stateOf2004 = async () => await run("grep '^State:' /proc/$(pgrep -xf 'sleep 2004')/status");
    await waitFor(async () => (await stateOf2004()).includes('(stopped)'), 'the sleep 2004 to be stopped');
    const alive = async () => (await run("pgrep -xf 'sleep (100[12]|200[1-6])' | wc -l")).trim();
    await waitFor(async () => (await alive()) === '8', 'the task and the leftovers to run');

    const { stopped, sandbox_id } = await ok(s.client, 'stop_processes', {});
    expect(sandbox_id).toBe(sb.sandbox_id);
    // The six sleeps and the TERM-ignoring shell: nothing else of the sandbox's was running.
    expect(stopped).toBe(7);
    expect(await run("pgrep -xf 'sleep 200[1-6]' || echo none")).toBe('none\n');
    expect((await run("pgrep -xf 'sleep 100[12]' | wc -l")).trim()).toBe('2');
    expect((await ok(s.client, 'get_task', { sandbox_id, task_id: task.task_id })).state).toBe('running');
    await ok(s.client, 'kill_sandbox', {});
  });
});
