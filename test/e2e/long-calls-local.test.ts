// Long and interactive commands with real local sandboxes (the suite: long-calls-suite.ts), once
// over Streamable HTTP, where progress travels on the call's own event stream, and where
// send_task_input's data travels (never on a command line: the host's /proc shows every process
// of a local sandbox).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { Progress } from '@modelcontextprotocol/sdk/types.js';
import { TEST_PROGRESS_INTERVAL_MS, describeLongCalls } from './long-calls-suite.js';
import { type HttpServer, localServers, ok, startHttp } from '../support/built-server.js';
import { allPids, cmdline } from '../support/processes.js';
import { waitFor } from '../support/wait.js';

const servers = localServers();
const env = { SANDBOX_MCP_PROGRESS_INTERVAL_MS: String(TEST_PROGRESS_INTERVAL_MS) };
let http: HttpServer | undefined;

// Registered after localServers: runs before its afterAll destroys the state directory.
afterAll(async () => {
  await http?.stop();
});

describeLongCalls('local', (args = []) => servers.connect(env, args), { hasPrivateTmp: true });

describe('long calls over Streamable HTTP', () => {
  it('sends progress on the call stream and promotes a long call', async () => {
    http = await startHttp({ SANDBOX_MCP_STATE_DIR: servers.stateDir, ...env });
    const { client } = await http.connect();
    await ok(client, 'create_sandbox', {});
    const progress: Progress[] = [];
    const [slow, promoted] = await Promise.all([
      // 4 s at a 500 ms interval: two reports even from a server a loaded machine stalls for a while.
      client.callTool({ name: 'run_command', arguments: { command: 'sleep 4; echo slow' } }, undefined, {
        onprogress: (p) => progress.push(p),
      }),
      ok(client, 'run_command', { command: 'sleep 30', background_after: 1 }),
    ]);
    expect(slow.structuredContent).toMatchObject({ exit_code: 0, stdout: 'slow\n' });
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(promoted).toMatchObject({ backgrounded: true, state: 'running' });
    expect(await ok(client, 'cancel_task', { sandbox_id: promoted.sandbox_id, task_id: promoted.task_id })).toMatchObject({
      state: 'cancelled',
    });
    await ok(client, 'kill_sandbox', {});
    await client.close();
  });
});

describe('a promoted call that finishes in time with more output than a task log holds', () => {
  it("shows each stream's true end, as the fast path does: through the resident, and through the per-call agent", async () => {
    // About 1.9 MiB of lines on each stream: the task logs keep the first MiB. The last line holds
    // a value only the server knows as a secret (its own variable): the server masks it.
    const secret = `host-secret-${randomBytes(8).toString('hex')}`;
    const command = `seq 1 300000; echo END-MARKER ${secret}; seq 1 300000 >&2; echo ERR-END >&2`;
    const lines = Array.from({ length: 300000 }, (_, i) => `${i + 1}\n`).join('');
    const [out, err] = [lines + `END-MARKER ${secret}\n`, lines + 'ERR-END\n'];
    const half = 32 * 1024;
    const shown = (full: string, part: string) => (full === out ? part.replace(secret, '[MASKED]') : part);
    for (const serverEnv of [
      { ...env, TAIL_TEST_TOKEN: secret },
      { ...env, TAIL_TEST_TOKEN: secret, SANDBOX_MCP_RESIDENT_AGENT: '0' },
    ]) {
      const s = await servers.connect(serverEnv);
      await ok(s.client, 'create_sandbox', {});
      // Below the call's timeout (60 s), or the call takes the fast path.
      const r = await ok(s.client, 'run_command', { command, background_after: 30 });
      expect(r).toMatchObject({ exit_code: 0, stdout_truncated: true, stderr_truncated: true, timed_out: false });
      expect(r.backgrounded).toBeUndefined();
      for (const [text, full] of [
        [r.stdout, out],
        [r.stderr, err],
      ] as const) {
        expect(text.startsWith(full.slice(0, half))).toBe(true);
        expect(text).toContain('output truncated');
        expect(text.endsWith(shown(full, full.slice(-half))), text.slice(-80)).toBe(true);
      }
      expect(r).toEqual(await ok(s.client, 'run_command', { command, background_after: 0 }));
      // A task's: get_task adds the end to the page that reaches the end of the log, once it ended.
      const task = await ok(s.client, 'start_task', { command });
      const handle = { sandbox_id: task.sandbox_id, task_id: task.task_id };
      let view: Record<string, any> = {};
      await waitFor(
        async () => (view = await ok(s.client, 'get_task', { ...handle, wait: 10 })).state !== 'running',
        'the task to end',
        60_000,
      );
      expect(view).toMatchObject({ state: 'succeeded', stdout_truncated: true, stdout_size: 1024 * 1024 });
      expect(view.stdout_tail).toBeUndefined();
      const atEnd = await ok(s.client, 'get_task', { ...handle, stdout_offset: view.stdout_size, stderr_offset: view.stderr_size });
      expect(atEnd).toMatchObject({ stdout: '', stdout_tail: shown(out, out.slice(-half)), stderr_tail: err.slice(-half) });
      await ok(s.client, 'kill_sandbox', {});
    }
  });
});

/** Every text a process's argv holds, with base64url runs decoded (the agent's requests are encoded so). */
function argvTexts(pid: number): string[] {
  return cmdline(pid).flatMap((arg) => [
    arg,
    ...(arg.match(/[A-Za-z0-9_-]{16,}/g) ?? []).map((run) => Buffer.from(run, 'base64url').toString('latin1')),
  ]);
}

function environOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return '';
  }
}

describe('send_task_input data on the way into the sandbox', () => {
  it("is in no process's command line (nor environment) while the call that delivers it runs: the resident takes it, no agent process starts", async () => {
    const s = await servers.connect(env);
    // The agent waits up to this long for room in a full pipe: the call stays in flight meanwhile.
    const sb = await ok(s.client, 'create_sandbox', { envs: { SANDBOX_AGENT_INPUT_WAIT_MS: '8000' } });
    const task = await ok(s.client, 'start_task', { command: 'sleep 300' });
    const at = { sandbox_id: sb.sandbox_id, task_id: task.task_id };
    // Fill the task's stdin pipe (64 KiB; sleep never reads), so the next input has to wait.
    for (let i = 0; i < 2; i++) await ok(s.client, 'send_task_input', { ...at, data: 'x'.repeat(32_768) });
    const marker = `typed-answer-${randomBytes(8).toString('hex')}`;
    let isInFlight = true;
    const sending = ok(s.client, 'send_task_input', { ...at, data: marker }).finally(() => (isInFlight = false));
    let callsSeen = 0;
    const leaks: string[] = [];
    while (isInFlight) {
      for (const pid of allPids()) {
        const texts = argvTexts(pid);
        // The agent call delivering this input: the request (op and task id) is on its command line.
        if (texts.some((t) => t.includes('"op":"input"') && t.includes(task.task_id))) callsSeen++;
        if (texts.some((t) => t.includes(marker))) leaks.push(`cmdline of ${pid}`);
        if (environOf(pid).includes(marker)) leaks.push(`environ of ${pid}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    // The pipe stayed full, so the call waited (and wrote nothing): it was in flight throughout.
    expect(await sending).toMatchObject({ bytes_written: 0 });
    // The sandbox's resident agent took the request as a message: no agent process ran for it
    // (a per-call agent would have shown its request on its command line, the data on its stdin).
    expect(callsSeen).toBe(0);
    expect(leaks).toEqual([]);
    await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
  });
});
