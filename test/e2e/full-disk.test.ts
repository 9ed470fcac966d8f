// A sandbox whose own mounts are full still has its output recorded (issue 37): the agent's state
// is a mount of its own (limits/disk-shares.ts). A run_command after the home and /tmp are full
// returns both streams whole; a long task that fills them midway keeps every line it wrote, read by
// a new server process after a restart. Bounded: each mount is filled to at most twice the budget.
import { describe, expect, it } from 'vitest';
import { localServers, ok, type StdioServer } from '../support/built-server.js';
import { waitFor } from '../support/wait.js';

const DISK_MB = 64;
const LINES = 20_000;
const FILL_AT = 5_000;
const servers = localServers();
const server = (): Promise<StdioServer> => servers.connect({ SANDBOX_MCP_SANDBOX_DISK: String(DISK_MB) });

/** Every byte of a task's stream, page by page. */
async function wholeStream(
  s: StdioServer,
  sandbox_id: string,
  task_id: string,
): Promise<{ stdout: string; stderr: string; view: Record<string, unknown> }> {
  let stdout = '';
  let stderr = '';
  for (let page = 0; page < 200; page++) {
    const view = await ok(s.client, 'get_task', {
      sandbox_id,
      task_id,
      stdout_offset: Buffer.byteLength(stdout),
      stderr_offset: Buffer.byteLength(stderr),
      limit: 65_536,
    });
    stdout += view.stdout as string;
    stderr += view.stderr as string;
    if (view.stdout === '' && view.stderr === '') return { stdout, stderr, view };
  }
  throw new Error('the task output did not end within 200 pages');
}

describe('a full disk loses no output', () => {
  it('after the home and /tmp are full, run_command returns both streams whole and a task its output', async () => {
    const s = await server();
    const id = (await ok(s.client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
    const fill = await ok(s.client, 'run_command', {
      sandbox_id: id,
      command: `for m in /home/user /tmp; do head -c ${2 * DISK_MB}M /dev/zero > $m/fill; done; df -k /home/user /tmp | tail -n +2`,
    });
    for (const line of (fill.stdout as string).trim().split('\n')) expect(line).toMatch(/ 0 +100% /);
    const r = await ok(s.client, 'run_command', { sandbox_id: id, command: 'echo hello-out; echo hello-err >&2' });
    expect(r).toMatchObject({
      exit_code: 0,
      stdout: 'hello-out\n',
      stderr: 'hello-err\n',
      stdout_truncated: false,
      stderr_truncated: false,
    });
    const task = await ok(s.client, 'start_task', { sandbox_id: id, command: 'echo task-out; echo task-err >&2' });
    const done = await waitFor(async () => {
      const v = await ok(s.client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 10 });
      return v.state === 'running' ? undefined : v;
    }, 'the task to end');
    expect(done).toMatchObject({
      state: 'succeeded',
      stdout: 'task-out\n',
      stderr: 'task-err\n',
      stdout_truncated: false,
      stderr_truncated: false,
    });
    expect(done.error).toBeUndefined();
    // Where output truly cannot be kept (the agent's own mount is full: here the sandbox filled it,
    // leaving 128 KiB), the result says so, naming the filesystem and what it has left.
    const state = '/home/user/.local/state/sandbox-agent';
    await ok(s.client, 'run_command', {
      sandbox_id: id,
      command: `avail=$(df -k --output=avail ${state} | tail -n 1); head -c $(( (avail - 128) * 1024 )) /dev/zero > ${state}/fill`,
    });
    const lost = await ok(s.client, 'run_command', { sandbox_id: id, command: `head -c 300000 /dev/zero | tr '\\0' a` });
    expect(lost).toMatchObject({ exit_code: 0, stdout_truncated: true });
    // The stream ends with why it is short (after its head and tail where what was kept exceeds the result's cap too).
    expect(lost.stdout).toMatch(
      /\[\.\.\. output lost: the filesystem of \/home\/user\/\.local\/state\/sandbox-agent\/tasks\/[0-9a-f]{32} \(\d+ KiB free\) filled up while the task ran[^\]]*\.\.\.\]\n$/,
    );
    expect((lost.stdout as string).replace(/[^a]/g, '').length).toBeLessThan(300_000);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it('a long task that fills the disk midway keeps every line it wrote, read again after a server restart', async () => {
    const first = await server();
    const id = (await ok(first.client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
    // Numbered lines (about 200 KB, below the log cap); the home and /tmp fill at line FILL_AT, the lines go on.
    const command =
      `i=0; while [ $i -lt ${LINES} ]; do echo "line $i"; i=$((i+1)); ` +
      `if [ $i = ${FILL_AT} ]; then head -c ${2 * DISK_MB}M /dev/zero > /home/user/fill; head -c ${2 * DISK_MB}M /dev/zero > /tmp/fill; fi; done`;
    const task = await ok(first.client, 'start_task', { sandbox_id: id, command, timeout: 300 });
    await waitFor(async () => {
      const v = await ok(first.client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 10, limit: 1 });
      return v.state === 'running' ? undefined : v;
    }, 'the task to end');
    await first.close();

    const second = await server();
    const { stdout, stderr, view } = await wholeStream(second, id, task.task_id as string);
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout_truncated: false });
    expect(view.error).toBeUndefined();
    expect(stdout).toBe(Array.from({ length: LINES }, (_, i) => `line ${i}\n`).join(''));
    expect(stderr.match(/No space left on device/g)).toHaveLength(2);
    await ok(second.client, 'kill_sandbox', { sandbox_id: id });
  });
});
