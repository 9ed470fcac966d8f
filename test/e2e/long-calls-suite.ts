// Long and interactive commands through the built server and the SDK Client, one suite for both
// providers (long-calls-local.test.ts, long-calls-e2b.test.ts): promotion to a task with
// background_after, progress notifications, and send_task_input — across server processes.
import type { CallToolResult, JSONRPCMessage, Progress } from '@modelcontextprotocol/sdk/types.js';
import { randomInt } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ok, type StdioServer, toolError } from '../support/built-server.js';
import { waitFor } from '../support/wait.js';

/** Starts a server of the provider under test; each test's servers are closed by the caller's afterAll. */
export type ServerFactory = (args?: string[]) => Promise<StdioServer>;

/** The progress interval every server of these suites runs with (SANDBOX_MCP_PROGRESS_INTERVAL_MS). */
export const TEST_PROGRESS_INTERVAL_MS = 500;

const RESULT_FIELDS = ['exit_code', 'stderr', 'stderr_truncated', 'stdout', 'stdout_truncated', 'timed_out'];
const HANDLE_FIELDS = [
  'backgrounded',
  'finished_at',
  'sandbox_id',
  'started_at',
  'state',
  'stderr_next_offset',
  'stderr_size',
  'stdout_next_offset',
  'stdout_size',
  'task_id',
];

/** Long-polls get_task until the task leaves `running`. */
async function finalView(client: StdioServer['client'], handle: Record<string, any>) {
  let view: Record<string, any> = {};
  await waitFor(
    async () => {
      view = await ok(client, 'get_task', { sandbox_id: handle.sandbox_id, task_id: handle.task_id, wait: 10 });
      return view.state !== 'running';
    },
    'the task to finish',
    60_000,
  );
  return view;
}

/** A tool call with a progress callback; returns the result and every progress notification seen. */
async function callWithProgress(client: StdioServer['client'], name: string, args: Record<string, unknown>) {
  const progress: Progress[] = [];
  const result = (await client.callTool({ name, arguments: args }, undefined, { onprogress: (p) => progress.push(p) })) as CallToolResult;
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  return { result: result.structuredContent as Record<string, any>, progress };
}

/** Records every message the client receives from now on, and the progress tokens of the requests it sends. */
function recordTraffic(server: StdioServer): { seen: JSONRPCMessage[]; tokens: Set<string | number> } {
  const seen: JSONRPCMessage[] = [];
  const tokens = new Set<string | number>();
  const original = server.transport.onmessage;
  server.transport.onmessage = (message: JSONRPCMessage) => {
    seen.push(message);
    original?.(message);
  };
  const send = server.transport.send.bind(server.transport);
  server.transport.send = (message: JSONRPCMessage) => {
    const token = (message as { params?: { _meta?: { progressToken?: string | number } } }).params?._meta?.progressToken;
    if (token !== undefined) tokens.add(token);
    return send(message);
  };
  return { seen, tokens };
}

function expectSteadyProgress(progress: Progress[], forbidden: string): void {
  expect(progress.length).toBeGreaterThanOrEqual(2);
  for (let i = 1; i < progress.length; i++) expect(progress[i]!.progress).toBeGreaterThan(progress[i - 1]!.progress);
  for (const p of progress) {
    expect(typeof p.message).toBe('string');
    expect(p.message).not.toContain(forbidden);
  }
}

/** What a provider's suite knows beyond the tools. */
export interface LongCallsOpts {
  /** The sandbox's /tmp is its own (so run_code's leftovers can be counted there). */
  hasPrivateTmp: boolean;
  /** How many lifetime-changing calls the provider has seen so far, where it can tell. */
  lifetimeCalls?: () => number;
}

/** The long-call tests against servers from `server`. */
export function describeLongCalls(provider: string, server: ServerFactory, opts: LongCallsOpts): void {
  // One server for the tests that need no restart of their own; it is also the "new server
  // process" of the tests that close their first one (server start-ups dominate this suite).
  let sharedServer: Promise<StdioServer> | undefined;
  const shared = () => (sharedServer ??= server());

  describe(`long and interactive commands (${provider})`, () => {
    it('promotes a call still running at background_after to a task handle that get_task reads to the end from a new server process; the sandbox is retained, one whose call finished is not', async () => {
      const first = await server();
      const finishedIn = await ok(first.client, 'create_sandbox', {});
      expect(await ok(first.client, 'run_command', { command: 'echo quick', background_after: 30 })).toMatchObject({ stdout: 'quick\n' });
      const sb = await ok(first.client, 'create_sandbox', { timeout: 600 });
      const handle = await ok(first.client, 'run_command', { command: 'sleep 8; echo done', background_after: 2 });
      expect(Object.keys(handle).sort()).toEqual([...RESULT_FIELDS, ...HANDLE_FIELDS].sort());
      expect(handle).toMatchObject({
        backgrounded: true,
        sandbox_id: sb.sandbox_id,
        state: 'running',
        exit_code: null,
        timed_out: false,
        stdout: '',
        stdout_next_offset: 0,
        finished_at: null,
      });
      expect(handle.task_id).toMatch(/^[0-9a-f]{32}$/);
      await first.close(); // the session ends: the promoted task retains its sandbox

      const second = await shared();
      expect((await ok(second.client, 'get_sandbox', { sandbox_id: sb.sandbox_id })).status).toBe('running');
      // A supervised call that finished retains nothing: the session's end destroyed its sandbox as usual.
      expect((await toolError(second.client, 'get_sandbox', { sandbox_id: finishedIn.sandbox_id })).category).toBe('not_found');
      const view = await finalView(second.client, handle);
      expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'done\n' });
      await ok(second.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    });

    it('returns exactly the usual result when the command finishes before background_after, capped like the fast path, and leaves no task behind', async () => {
      const s = await shared();
      await ok(s.client, 'create_sandbox', {});
      const small = await ok(s.client, 'run_command', { command: 'echo out; echo err >&2; exit 3', background_after: 30 });
      expect(small).toEqual({
        exit_code: 3,
        stdout: 'out\n',
        stderr: 'err\n',
        stdout_truncated: false,
        stderr_truncated: false,
        timed_out: false,
      });
      // Both streams over 64 KiB, then only one: the same head/tail as without background_after (0: the fast path).
      for (const command of [
        "head -c 70000 /dev/zero | tr '\\0' a; printf END; seq 1 14000 >&2",
        'echo small; seq 1 14000 >&2; printf ÄÖÜ',
      ]) {
        const fast = await ok(s.client, 'run_command', { command, background_after: 0 });
        const supervised = await ok(s.client, 'run_command', { command, background_after: 30 });
        expect(supervised).toEqual(fast);
        expect(supervised.stderr_truncated).toBe(true);
      }
      // Stdin is empty on both paths: a command that reads it ends at once, not at background_after.
      for (const command of ['cat', 'read x; echo got:$x', 'grep x']) {
        const fast = await ok(s.client, 'run_command', { command, background_after: 0 });
        expect(await ok(s.client, 'run_command', { command, background_after: 30 })).toEqual(fast);
        expect(fast.backgrounded).toBeUndefined();
      }
      // Per-call variables reach the command; secret-named ones are masked.
      const envs = { PLAIN: 'visible', API_KEY: 'sekrit-value-' + randomInt(1e9) };
      const masked = await ok(s.client, 'run_command', { command: 'echo "$PLAIN $API_KEY"', envs, background_after: 30 });
      expect(masked.stdout).toBe('visible [MASKED]\n');
      const code = await ok(s.client, 'run_code', { code: 'print("from python")', background_after: 30 });
      expect(code).toMatchObject({ exit_code: 0, stdout: 'from python\n' });
      // Every supervised call above removed its finished task: no task directory holds a slot (the
      // probe itself runs on the fast path, or it would be a task while it runs). Polled, bounded:
      // the resident removes an exec's task once the answer is out, so the last may still be going.
      const tasksLeft = async () =>
        (
          await ok(s.client, 'run_command', { command: 'ls -A ~/.local/state/sandbox-agent/tasks | wc -l', background_after: 0 })
        ).stdout.trim();
      await waitFor(async () => (await tasksLeft()) === '0', 'no task left behind');
      if (opts.hasPrivateTmp) {
        expect((await ok(s.client, 'run_command', { command: 'ls /tmp | grep -c sandbox-mcp-code || true' })).stdout.trim()).toBe('0');
      }
      await ok(s.client, 'kill_sandbox', {});
    });

    it("shows the true end of output over the 1 MiB task log, as the fast path does, and get_task adds it at the log's end", async () => {
      const s = await shared();
      await ok(s.client, 'create_sandbox', {});
      // About 1.9 MiB of lines: the task's log keeps the first MiB, the supervisor the end.
      const command = 'seq 1 300000; echo END-MARKER';
      const r = await ok(s.client, 'run_command', { command, background_after: 30 });
      expect(r).toMatchObject({ exit_code: 0, stdout_truncated: true });
      expect(r.stdout.endsWith('299999\n300000\nEND-MARKER\n')).toBe(true);
      expect(r).toEqual(await ok(s.client, 'run_command', { command, background_after: 0 }));
      const handle = await ok(s.client, 'start_task', { command });
      const view = await finalView(s.client, handle);
      expect(view).toMatchObject({ state: 'succeeded', stdout_truncated: true, stdout_size: 1024 * 1024 });
      const atEnd = await ok(s.client, 'get_task', {
        sandbox_id: handle.sandbox_id,
        task_id: handle.task_id,
        stdout_offset: view.stdout_size,
      });
      expect(atEnd.stdout_tail.endsWith('300000\nEND-MARKER\n')).toBe(true);
      expect(Buffer.byteLength(atEnd.stdout_tail)).toBe(32 * 1024);
      await ok(s.client, 'kill_sandbox', {});
    });

    it('feeds stdin: a prompt answered through send_task_input from this and from a new server process, cat ended by eof, input to a finished task or a promoted call refused', async () => {
      const first = await server();
      // A generous bound on the agent's wait for the supervisor to confirm an eof: a loaded
      // machine must not turn a slow confirmation into stdin_closed: false.
      const sb = await ok(first.client, 'create_sandbox', { timeout: 600, envs: { SANDBOX_AGENT_INPUT_WAIT_MS: '30000' } });
      const task = await ok(first.client, 'start_task', { command: 'read x; echo got:$x' });
      const at = { sandbox_id: sb.sandbox_id, task_id: task.task_id };
      expect(await ok(first.client, 'send_task_input', { ...at, data: 'hello\n' })).toEqual({
        ...at,
        bytes_written: 6,
        stdin_closed: false,
      });
      expect(await finalView(first.client, at)).toMatchObject({ state: 'succeeded', stdout: 'got:hello\n' });

      // A task waiting at its prompt, answered after the server was replaced.
      const prompt = await ok(first.client, 'start_task', { command: 'echo "name?"; read x; echo got:$x' });
      expect(prompt).toMatchObject({ state: 'running' });
      const promptAt = { sandbox_id: prompt.sandbox_id, task_id: prompt.task_id };
      // A promoted call's stdin is empty, as on the fast path: it takes no input, and says so.
      const promoted = await ok(first.client, 'run_command', { command: 'sleep 30', background_after: 1 });
      expect(promoted).toMatchObject({ backgrounded: true, state: 'running' });
      const promotedAt = { sandbox_id: promoted.sandbox_id, task_id: promoted.task_id };
      const noStdin = await toolError(first.client, 'send_task_input', { ...promotedAt, data: 'hello\n' });
      expect([noStdin.category, noStdin.code]).toEqual(['conflict', 'no_stdin']);
      expect(noStdin.suggestion).toMatch(/start_task/);
      expect(await ok(first.client, 'cancel_task', promotedAt)).toMatchObject({ state: 'cancelled' });
      await first.close();
      const second = await shared();
      const lifetimeBefore = opts.lifetimeCalls?.();
      expect((await ok(second.client, 'send_task_input', { ...promptAt, data: 'hello\n' })).bytes_written).toBe(6);
      // A task tool: no lifetime extension, even from a process that had to connect afresh.
      expect(opts.lifetimeCalls?.()).toBe(lifetimeBefore);
      expect(await finalView(second.client, promptAt)).toMatchObject({ state: 'succeeded', stdout: 'name?\ngot:hello\n' });

      const cat = await ok(second.client, 'start_task', { sandbox_id: sb.sandbox_id, command: 'cat' });
      const catAt = { sandbox_id: sb.sandbox_id, task_id: cat.task_id };
      const sent = await ok(second.client, 'send_task_input', { ...catAt, data: 'a\nb', eof: true });
      expect(sent.bytes_written).toBe(3);
      expect(sent.stdin_closed).toBe(true);
      expect(await finalView(second.client, catAt)).toMatchObject({ state: 'succeeded', stdout: 'a\nb' });
      const refused = await toolError(second.client, 'send_task_input', { ...catAt, data: 'late\n' });
      expect([refused.category, refused.code]).toEqual(['conflict', 'task_finished']);

      // Strict input: named fields, never the value.
      const tooLong = await toolError(second.client, 'send_task_input', { ...catAt, data: 'é'.repeat(16_385) });
      expect(tooLong.category).toBe('invalid_argument');
      expect(tooLong.suggestion).toBe('field `data` is too long (maximum 32768 bytes of UTF-8)');
      expect((await toolError(second.client, 'send_task_input', { ...catAt, data: 'x', extra: 1 })).suggestion).toMatch(/unexpected field/);
      expect((await toolError(second.client, 'send_task_input', { sandbox_id: sb.sandbox_id, data: 'x' })).suggestion).toBe(
        'field `task_id` is required',
      );
      await ok(second.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    });

    it('installs the agent when send_task_input is the first call into a sandbox (its data waiting on stdin meanwhile), then answers for the task', async () => {
      const s = await shared();
      const sb = await ok(s.client, 'create_sandbox', {});
      const unknown = await toolError(s.client, 'send_task_input', { sandbox_id: sb.sandbox_id, task_id: 'a'.repeat(32), data: 'hello\n' });
      expect([unknown.category, unknown.code]).toEqual(['not_found', 'not_found']);
      await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    });

    it('reports progress at the interval with a progress token (fast path, promotable call, get_task wait), and none without one', async () => {
      const s = await shared();
      const sb = await ok(s.client, 'create_sandbox', {});
      const waiting = await ok(s.client, 'start_task', { command: 'sleep 60' });
      const { seen, tokens } = recordTraffic(s);
      const marker = 'OUT' + randomInt(1e9);
      // 4 s at a 500 ms interval: two reports (expectSteadyProgress) even from a server whose event
      // loop a loaded machine stalls for a while (2 s left one tick at 1.5 s in reach).
      const [fast, promotable, poll, silent] = await Promise.all([
        callWithProgress(s.client, 'run_command', { command: `echo ${marker}; sleep 4` }),
        callWithProgress(s.client, 'run_command', { command: `echo ${marker}; sleep 4`, background_after: 30 }),
        callWithProgress(s.client, 'get_task', { sandbox_id: sb.sandbox_id, task_id: waiting.task_id, wait: 4 }),
        s.client.callTool({ name: 'run_command', arguments: { command: 'sleep 2' } }),
      ]);
      expect(fast.result.stdout).toBe(`${marker}\n`);
      expect(promotable.result.stdout).toBe(`${marker}\n`);
      expect(poll.result.state).toBe('running');
      expect((silent as CallToolResult).isError).toBeFalsy();
      for (const p of [fast.progress, promotable.progress, poll.progress]) expectSteadyProgress(p, marker);
      // A promotable call reports progress as the fast path does (the resident's exec; a call run
      // as a task from the start, where there is no resident, adds byte counts).
      expect(promotable.progress.at(-1)!.message).toMatch(/^command running for \d+ s/);
      // Every notification belongs to one of the three calls that sent a token: the fourth got none.
      // Told by its token, not by what each call's handler got: the SDK's client hands a
      // notification to the handler a microtask late, so one read in the same chunk as its call's
      // response finds the handler gone and is dropped (a loaded machine's client reads late: 23
      // sent, 22 handed, once in 6 runs beside three busy loops).
      const notified = seen.filter((m) => 'method' in m && m.method === 'notifications/progress');
      const notifiedTokens = notified.map((m) => (m as unknown as { params: { progressToken: string | number } }).params.progressToken);
      expect(tokens.size).toBe(3);
      expect(new Set(notifiedTokens)).toEqual(tokens);
      expect(notified.length).toBeGreaterThanOrEqual(fast.progress.length + promotable.progress.length + poll.progress.length);
      await ok(s.client, 'kill_sandbox', {});
    });

    it("removes run_code's program once the code ends, by the agent: after an exit, a timeout, a promoted run's timeout and its cancel, the interpreter having replaced the command's shell", async () => {
      const s = await shared();
      await ok(s.client, 'create_sandbox', {});
      // `$0` is the program's path; its interpreter's parent is the agent that removes the file (or
      // its task's supervisor), not a shell kept to remove it by a trap.
      const code = 'echo "$0 $(cat /proc/$PPID/comm)"';
      const slow = `${code}; sleep 30`;
      const programOf = (stdout: string): string => {
        const [path, parent] = stdout.trim().split(' ');
        expect(path).toMatch(/^\/tmp\/sandbox-mcp-code-[0-9a-f]{16}\.sh$/);
        expect(['bash', 'sh']).not.toContain(parent);
        return path!;
      };
      // The sandbox's /tmp may be the host's (the e2b fake): this run's own file is looked for.
      const isLeft = async (stdout: string) =>
        (await ok(s.client, 'run_command', { command: `test -e ${programOf(stdout)} && echo left || echo gone`, background_after: 0 }))
          .stdout;
      for (const how of [{}, { background_after: 0 }]) {
        const r = await ok(s.client, 'run_code', { language: 'bash', code, ...how });
        expect(r.exit_code).toBe(0);
        expect(await isLeft(r.stdout)).toBe('gone\n');
      }
      const timedOut = await ok(s.client, 'run_code', { language: 'bash', code: slow, timeout: 2, background_after: 0 });
      expect(timedOut.timed_out).toBe(true);
      expect(await isLeft(timedOut.stdout)).toBe('gone\n');
      // Promoted, then ended by its timeout, or cancelled: its task's supervisor removes it.
      const promoted = await ok(s.client, 'run_code', { language: 'bash', code: slow, timeout: 4, background_after: 1 });
      expect(promoted).toMatchObject({ backgrounded: true });
      const ended = await finalView(s.client, promoted);
      expect(ended.state).toBe('timed_out');
      expect(await isLeft(ended.stdout)).toBe('gone\n');
      const cancelled = await ok(s.client, 'run_code', { language: 'bash', code: slow, background_after: 1 });
      expect(cancelled).toMatchObject({ backgrounded: true });
      expect((await ok(s.client, 'cancel_task', { sandbox_id: cancelled.sandbox_id, task_id: cancelled.task_id })).state).toBe('cancelled');
      expect(await isLeft((await finalView(s.client, cancelled)).stdout)).toBe('gone\n');
      await ok(s.client, 'kill_sandbox', {});
    });

    it('takes background_after from the server option, never promotes a call its own timeout ends first, and stops the command of a call cancelled before promotion', async () => {
      const s = await server(['--background-after', '1']);
      await ok(s.client, 'create_sandbox', {});
      const late = await ok(s.client, 'run_command', { command: 'sleep 3; echo late' });
      expect(late).toMatchObject({ backgrounded: true, state: 'running' });
      // timeout <= background_after: the fast path, the usual timed-out result.
      const short = await ok(s.client, 'run_command', { command: 'sleep 5', timeout: 1 });
      expect(short).toMatchObject({ timed_out: true });
      expect(short.backgrounded).toBeUndefined();

      // pgrep sees every process of the machine where the sandbox runs on the host (the e2b fake):
      // nine random digits, which no other test's sleep (e.g. test/local's `sleep 4242`) can be.
      const seconds = 100_000_000 + randomInt(900_000_000);
      const aborter = new AbortController();
      const call = s.client.callTool({ name: 'run_command', arguments: { command: `sleep ${seconds}`, background_after: 30 } }, undefined, {
        signal: aborter.signal,
      });
      await waitFor(
        // slee[p]: the pattern must not match the shell running pgrep; timeout 1 keeps these on the fast path.
        async () =>
          (await ok(s.client, 'run_command', { command: `pgrep -f 'slee[p] ${seconds}$' || true`, timeout: 1 })).stdout.trim() !== '',
        'the command to run',
      );
      aborter.abort();
      await expect(call).rejects.toThrow();
      await waitFor(
        async () =>
          (await ok(s.client, 'run_command', { command: `pgrep -f 'slee[p] ${seconds}$' || echo none`, timeout: 1 })).stdout.trim() ===
          'none',
        'the cancelled call to stop its command',
      );
      // 0 waits, whatever the server's option.
      expect(await ok(s.client, 'run_command', { command: 'sleep 2; echo waited', background_after: 0 })).toMatchObject({
        stdout: 'waited\n',
      });
      expect((await toolError(s.client, 'run_command', { command: 'true', background_after: -1 })).suggestion).toBe(
        'field `background_after` is too small (minimum 0)',
      );
      expect((await toolError(s.client, 'run_code', { code: 'pass', background_after: '5' })).suggestion).toBe(
        'field `background_after` must be a number',
      );
      await ok(s.client, 'kill_sandbox', {});
    });
  });
}
