// The operator's commands through the BUILT bin against real local sandboxes (and ls/logs/kill
// against the e2b fake): ls for people and for scripts, logs with --follow and its exit statuses,
// a capped stream's kept end after the gap, Ctrl-C that stops following but never the task,
// cancel, kill, the errors, and --json of logs, cancel and kill.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { spawn as spawnPty } from '@lydell/node-pty';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAgentBundle } from '../../host/providers/agent-bundle.js';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { CancelResultSchema } from '../../host/cli/cancel.js';
import { KillResultSchema } from '../../host/cli/kill.js';
import { LogsChunkSchema, LogsEndSchema, LogsLineSchema, type LogsChunk } from '../../host/cli/logs.js';
import { ListingSchema } from '../../host/tasks/listing.js';
import { isProviderError } from '../../host/providers/provider-error.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { TAIL_GAP_TEXT } from '../../host/util/follow-task.js';
import { LIMITS } from '../../shared/limits.js';
import { PROTOCOL_VERSION } from '../../shared/protocol.js';
import { startFakeE2b, type FakeE2b } from '../e2b-fake/index.js';
import { connectStdio, ok, serverEnv } from '../support/built-server.js';
import { HOST_JS, REPO } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { allPids, pgidOf } from '../support/processes.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
let provider: Provider;
let agent: AgentClient;
let sandboxId: string;

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [HOST_JS, ...args],
      // Room for a whole capped stream (1 MiB) and its tail, as JSON too.
      { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, ...extraEnv }), maxBuffer: 8 * 1024 * 1024 },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A running CLI whose output is collected as it arrives. */
function spawnCli(
  args: string[],
  opts: { detached?: boolean } = {},
): { child: ChildProcess; stdout: () => string; stderr: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [HOST_JS, ...args], {
    env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: opts.detached ?? false,
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString('utf8')));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function startTask(command: string, timeoutS = 300, sandbox = sandboxId): Promise<string> {
  const taskId = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, '0')).join('');
  await agent.call(
    provider,
    sandbox,
    { protocol: PROTOCOL_VERSION, op: 'start', task_id: taskId, command, timeout_s: timeoutS },
    { timeoutS: 60 },
  );
  return taskId;
}

const taskView = (taskId: string, sandbox = sandboxId) =>
  agent.call(provider, sandbox, { protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId }, { timeoutS: 60 });
const taskState = async (taskId: string, sandbox = sandboxId) => (await taskView(taskId, sandbox)).state;

/**
 * The pid its supervisor recorded in the task's status. start may answer before the supervisor's
 * first status write (it reports after a bounded wait), so the file is read once it names one.
 */
function supervisorPid(taskId: string): Promise<number> {
  return waitFor(async () => {
    try {
      const status = JSON.parse(
        (await provider.readFile(sandboxId, `.local/state/sandbox-agent/tasks/${taskId}/status.json`)).data.toString(),
      );
      return (status as { supervisor: { pid: number } | null }).supervisor?.pid;
    } catch (e) {
      if (isProviderError(e) && e.category === 'not_found') return undefined;
      throw e;
    }
  }, `task ${taskId}'s status to name its supervisor`);
}

beforeAll(async () => {
  requireSandboxes();
  provider = createLocalProvider({ stateDir });
  agent = new AgentClient(loadAgentBundle(join(REPO, 'dist')));
  sandboxId = (await provider.create({ timeoutS: 900 })).sandbox_id;
});
afterAll(async () => {
  await provider?.close();
  await destroyStateDir(stateDir);
});

describe('sandbox-mcp ls', () => {
  it('shows each sandbox and its running task, in columns for people and as JSON for scripts', async () => {
    const taskId = await startTask('echo hi; sleep 600');
    // start may answer before the supervisor's first status write or the command's first line:
    // what ls must show (running, 3 B of stdout) is there before ls runs.
    await waitFor(async () => {
      const view = await taskView(taskId);
      return view.state === 'running' && view.stdout_size === 3;
    }, 'the task to run and print its line');
    const idle = (await provider.create({ timeoutS: 900 })).sandbox_id;

    const people = await cli(['ls']);
    expect(people.code).toBe(0);
    const lines = people.stdout.split('\n');
    expect(lines[0]).toMatch(/^SANDBOX +TEMPLATE +STATE +STARTED +ENDS +LIMITS$/);
    const sbLine = lines.findIndex((l) => l.startsWith(`local:${sandboxId} `));
    expect(sbLine).toBeGreaterThan(0);
    expect(lines[sbLine]).toMatch(/ base +running +\d+[smh]\S* ago +in \d+m/);
    // Its task table follows it, indented, with the task running.
    const taskLine = lines.slice(sbLine).find((l) => l.includes(taskId))!;
    expect(taskLine).toMatch(new RegExp(`^    ${taskId} +running +- +\\d+s ago +\\d+s +3 B +0 B$`));
    const idleLine = lines.findIndex((l) => l.startsWith(`local:${idle} `));
    expect(lines[idleLine + 1]).toBe('    no tasks');
    // Not a terminal: no colour codes at all.
    expect(people.stdout).not.toContain('\x1b[');

    const scripts = await cli(['ls', '--json']);
    expect(scripts.code).toBe(0);
    const listing = ListingSchema.parse(JSON.parse(scripts.stdout));
    const sb = listing.sandboxes.find((s) => s.sandbox_id === `local:${sandboxId}`)!;
    expect(sb).toMatchObject({ template: 'base', status: 'running', tasks_error: null, tasks_truncated: false });
    expect(sb.tasks).toContainEqual(expect.objectContaining({ task_id: taskId, state: 'running', exit_code: null, stdout_size: 3 }));
    expect(listing.sandboxes.find((s) => s.sandbox_id === `local:${idle}`)?.tasks).toEqual([]);
    await provider.kill(idle);
  });
});

describe('sandbox-mcp logs', () => {
  it('--follow prints each line while the task still runs, then the final state, and exits with the task code', async () => {
    // Each line is followed by a wait for a file the test creates only once the CLI has printed
    // that line: output held back until the end (or until the task's state changes) never
    // arrives, and the test fails on its bound instead of passing late.
    const taskId = await startTask('for i in 1 2 3 4 5; do echo line$i; until [ -e go$i ]; do sleep 0.1; done; done; exit 7');
    const run = spawnCli(['logs', `local:${sandboxId}`, taskId, '--follow']);
    let expected = '';
    for (const i of [1, 2, 3, 4, 5]) {
      expected += `line${i}\n`;
      await waitFor(() => run.stdout() === expected, `line ${i} on the CLI's stdout while the task waits`);
      expect(await taskState(taskId)).toBe('running');
      await provider.writeFile(sandboxId, `go${i}`, Buffer.alloc(0));
    }
    expect(await run.exited).toBe(7);
    expect(run.stdout()).toBe(expected);
    expect(run.stderr()).toBe(`sandbox-mcp: task ${taskId} failed, exit code 7\n`);
  });

  it("on a terminal shows the task output's escapes as text (colours kept); into a pipe, its bytes as they are", async () => {
    // The line above the output, which \e[1A\e[2K would erase if it reached the terminal as it is.
    const taskId = await startTask("printf '\\033[31mred\\033[0m\\n\\033[1A\\033[2Kerased?\\033]0;title\\007\\n'");
    await waitFor(async () => (await taskState(taskId)) === 'succeeded', 'the task to end');
    const term = spawnPty(process.execPath, [HOST_JS, 'logs', sandboxId, taskId], {
      cols: 100,
      rows: 30,
      env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir, TERM: 'xterm' }),
    });
    let shown = '';
    term.onData((d) => (shown += d));
    expect(await new Promise<number>((resolve) => term.onExit(({ exitCode }) => resolve(exitCode)))).toBe(0);
    expect(shown).toContain('\x1b[31mred\x1b[0m');
    expect(shown).toContain('\\e[1A\\e[2Kerased?\\e]0;title\\a');
    expect(shown).not.toContain('\x1b[1A');
    expect(shown).not.toContain('\x1b]0;');
    const piped = await cli(['logs', sandboxId, taskId]);
    expect(piped.stdout).toBe('\x1b[31mred\x1b[0m\n\x1b[1A\x1b[2Kerased?\x1b]0;title\x07\n');
  });

  it('prints from an offset, or the stderr stream; without --follow it ends at once', async () => {
    const taskId = await startTask('printf abcdef; printf E1 >&2');
    await waitFor(async () => (await taskState(taskId)) === 'succeeded', 'the task to end');
    const from = await cli(['logs', sandboxId, taskId, '--from', '2']);
    expect(from).toEqual({ code: 0, stdout: 'cdef', stderr: `sandbox-mcp: task ${taskId} succeeded, exit code 0\n` });
    const stderr = await cli(['logs', sandboxId, taskId, '--stderr']);
    expect(stderr.stdout).toBe('E1');
    // At the end: nothing more. Past it: a bad command line, as get_task refuses such an offset.
    expect(await cli(['logs', sandboxId, taskId, '--from', '6'])).toMatchObject({ code: 0, stdout: '' });
    expect(await cli(['logs', sandboxId, taskId, '--from', '100'])).toEqual({
      code: 2,
      stdout: '',
      stderr: 'sandbox-mcp: --from is past the end of stdout (6 bytes so far): pass an offset logs --json printed\n',
    });

    const running = await startTask('echo started; sleep 600');
    await waitFor(async () => (await cli(['logs', sandboxId, running])).stdout === 'started\n', 'the first output');
    const now = await cli(['logs', sandboxId, running]);
    expect(now.code).toBe(0);
    expect(now.stderr).toContain('is still running (--follow keeps printing until it ends)');
  });

  it("prints a capped stream's first MiB, then its kept end after the gap (on stderr), following or not, as JSON too", async () => {
    // More than the cap: the log keeps the first MiB, the supervisor the last 32 KiB. The task
    // waits for a file after its first byte, so --follow is reading before the stream passes the cap.
    const taskId = await startTask(
      "printf b; until [ -e go-capped ]; do sleep 0.1; done; head -c 1200000 /dev/zero | tr '\\0' a; echo THE-END",
    );
    const stream = 'b' + 'a'.repeat(1_200_000) + 'THE-END\n';
    const head = stream.slice(0, LIMITS.streamCapBytes);
    const tail = stream.slice(-LIMITS.streamTailBytes);
    const stderr = [
      `sandbox-mcp: ${TAIL_GAP_TEXT}`,
      `sandbox-mcp: task ${taskId} succeeded, exit code 0 (its stdout reached the 1 MiB cap: the stream's last 32 KiB were printed after the gap)`,
      '',
    ].join('\n');

    const followed = spawnCli(['logs', sandboxId, taskId, '--follow']);
    await waitFor(() => followed.stdout() === 'b', "the first byte on the CLI's stdout");
    await provider.writeFile(sandboxId, 'go-capped', Buffer.alloc(0));
    expect(await followed.exited).toBe(0);
    expect(followed.stdout() === head + tail).toBe(true); // not toBe: a 1 MiB diff helps no one
    expect(followed.stderr()).toBe(stderr);

    const plain = await cli(['logs', sandboxId, taskId]);
    expect(plain.code).toBe(0);
    expect(plain.stdout.length).toBe(head.length + tail.length);
    expect(plain.stdout === head + tail).toBe(true);
    expect(plain.stdout.endsWith('a'.repeat(100) + 'THE-END\n')).toBe(true);
    expect(plain.stderr).toBe(stderr);
    expect(plain.stderr).not.toContain('the rest was not kept');

    // From the cap: the log has nothing more, so only the kept end.
    expect(await cli(['logs', sandboxId, taskId, '--from', String(LIMITS.streamCapBytes)])).toEqual({ code: 0, stdout: tail, stderr });

    const json = await cli(['logs', sandboxId, taskId, '--json']);
    expect(json).toMatchObject({ code: 0, stderr: '' });
    const lines = json.stdout
      .slice(0, -1)
      .split('\n')
      .map((l) => LogsLineSchema.parse(JSON.parse(l)));
    expect(lines.at(-1)).toEqual({ state: 'succeeded', exit_code: 0, next_offset: LIMITS.streamCapBytes });
    expect(lines.at(-2)).toEqual({ stream: 'stdout', tail });
    const chunks = lines.slice(0, -2).map((l) => LogsChunkSchema.parse(l));
    expect(chunks.map((c) => c.text).join('') === head).toBe(true);
  });

  it("masks the secret values of the CLI's own environment, as get_task masks the server's", async () => {
    const taskId = await startTask('printf leak:hunter2hunter2');
    await waitFor(async () => (await taskState(taskId)) === 'succeeded', 'the task to end');
    const r = await cli(['logs', sandboxId, taskId], { DEPLOY_TOKEN: 'hunter2hunter2' });
    expect(r.stdout).toBe('leak:[MASKED]');
  });

  it('Ctrl-C stops following and leaves the task running', async () => {
    const taskId = await startTask('echo started; sleep 600');
    // Its own process group, as a shell's job: a terminal's Ctrl-C signals the whole foreground
    // group, the CLI and every child it has running at that moment.
    const run = spawnCli(['logs', sandboxId, taskId, '-f'], { detached: true });
    await waitFor(() => run.stdout() === 'started\n', 'the first line');
    const group = -run.child.pid!;
    try {
      process.kill(group, 'SIGINT');
      expect(await run.exited).toBe(130);
      expect(run.stderr()).toBe(`sandbox-mcp: stopped following; task ${taskId} keeps running\n`);
      expect(await taskState(taskId)).toBe('running');
    } finally {
      // Only a group that still has members: once they are all gone its number is free, and a
      // process of another test could lead a group of that number.
      if (allPids().some((pid) => pgidOf(pid) === -group)) {
        try {
          process.kill(group, 'SIGKILL');
        } catch {
          // Its last member ended meanwhile: nothing of the CLI's is left behind.
        }
      }
    }
  });

  it('exits 124 for a timed-out task, 125 for a cancelled one and 123 when the outcome is unknown', async () => {
    const timedOut = await startTask('sleep 60', 1);
    const t = await cli(['logs', sandboxId, timedOut, '--follow']);
    expect(t.code).toBe(124);
    expect(t.stderr).toBe(`sandbox-mcp: task ${timedOut} timed out\n`);

    const cancelled = await startTask('sleep 600');
    const c = await cli(['cancel', sandboxId, cancelled]);
    expect(c).toEqual({ code: 0, stdout: `task ${cancelled} cancelled\n`, stderr: '' });
    expect((await cli(['logs', sandboxId, cancelled])).code).toBe(125);

    // Its supervisor killed: nothing can confirm the outcome any more.
    const lost = await startTask('sleep 600');
    await provider.exec(sandboxId, `kill -9 ${await supervisorPid(lost)}`, { timeoutS: 30 });
    await waitFor(async () => (await taskState(lost)) === 'unknown', 'the task to read unknown');
    const u = await cli(['logs', sandboxId, lost, '-f']);
    expect(u.code).toBe(123);
    expect(u.stderr).toContain(`task ${lost}: state unknown (`);
  });
});

describe('sandbox-mcp cancel and kill', () => {
  it('cancel reports a task that had already ended, and what it ended as', async () => {
    const taskId = await startTask('exit 4');
    await waitFor(async () => (await taskState(taskId)) === 'failed', 'the task to fail');
    expect(await cli(['cancel', sandboxId, taskId])).toEqual({
      code: 0,
      stdout: `task ${taskId} had already ended: failed, exit code 4\n`,
      stderr: '',
    });
  });

  it('kill destroys the sandbox; errors print the category and suggestion and exit 1; bad command lines exit 2', async () => {
    const doomed = (await provider.create({ timeoutS: 300 })).sandbox_id;
    expect(await cli(['kill', `local:${doomed}`])).toEqual({ code: 0, stdout: `killed local:${doomed}\n`, stderr: '' });
    await expect(provider.getInfo(doomed)).rejects.toMatchObject({ category: 'not_found' });

    const again = await cli(['kill', doomed]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^sandbox-mcp: not_found: The sandbox does not exist/);
    const gone = await cli(['logs', doomed, '0'.repeat(32)]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('not_found');
    const noTask = await cli(['logs', sandboxId, '0'.repeat(32)]);
    expect(noTask.code).toBe(1);
    expect(noTask.stderr).toContain('not_found');

    const bad = await cli(['cancel', sandboxId, 'SECRET-VALUE-123']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).not.toContain('SECRET-VALUE-123');
    expect((await cli(['kill'])).code).toBe(2);
    expect((await cli(['ls', '--follow'])).code).toBe(2);
    const badId = await cli(['kill', 'local:../../etc']);
    expect(badId.code).toBe(2);
    expect(badId.stderr).not.toContain('etc');
  });
});

describe('only what was asked', () => {
  it("ls, logs and kill print no server log lines, not even a sandbox's earlier egress refusals", async () => {
    // A refusal in the keeper's record, as a server would have logged it when it happened.
    const refused = (await provider.create({ timeoutS: 300, network: { allowOut: ['127.0.0.1:9'] } })).sandbox_id;
    const r = await provider.exec(refused, 'curl -sS -m 10 http://refused.example/', { timeoutS: 30 });
    expect(r.stdout.toString()).toContain('refused.example');
    await waitFor(
      async () => (await provider.egressNotes!(refused, { sinceMs: 0 })).some((n) => n.includes('refused.example')),
      "the refusal in the sandbox's record",
    );
    const taskId = await startTask('echo done', 300, refused);
    await waitFor(async () => (await taskState(taskId, refused)) === 'succeeded', 'the task to end');

    const ls = await cli(['ls']);
    expect({ code: ls.code, stderr: ls.stderr }).toEqual({ code: 0, stderr: '' });
    expect(ls.stdout).toContain(`local:${refused} `);
    expect(await cli(['logs', refused, taskId])).toEqual({
      code: 0,
      stdout: 'done\n',
      stderr: `sandbox-mcp: task ${taskId} succeeded, exit code 0\n`,
    });
    expect(await cli(['ls', '--json'])).toMatchObject({ code: 0, stderr: '' });
    expect(await cli(['kill', refused])).toEqual({ code: 0, stdout: `killed local:${refused}\n`, stderr: '' });
  });
});

describe('--json for scripts', () => {
  // One sandbox for every --json test; the last one kills it.
  let sb: string;
  beforeAll(async () => {
    sb = (await provider.create({ timeoutS: 900 })).sandbox_id;
  });

  /** `logs --json` output: its chunks, and its last line (which must be the end). */
  function parseLogs(stdout: string) {
    expect(stdout.endsWith('\n')).toBe(true);
    const lines = stdout.slice(0, -1).split('\n');
    const chunks = lines.slice(0, -1).map((l) => LogsChunkSchema.parse(JSON.parse(l)));
    return { chunks, end: LogsEndSchema.parse(JSON.parse(lines.at(-1)!)) };
  }

  /** Each chunk starts where the one before it ended; returns the byte after the last. */
  function expectContiguous(chunks: readonly LogsChunk[], from: number): number {
    let offset = from;
    for (const c of chunks) {
      expect(c).toMatchObject({ stream: 'stdout', offset });
      offset += Buffer.byteLength(c.text);
    }
    return offset;
  }

  it('logs --json of a finished task: chunks whose text is the output at consistent offsets, then its state and exit code', async () => {
    // 90,000 bytes of 3-byte characters: more than one 64 KiB page, split mid-character.
    const output = '€'.repeat(30_000) + '\ndone\n';
    const taskId = await startTask(`node -e 'process.stdout.write("€".repeat(30000) + "\\ndone\\n")'; exit 3`, 300, sb);
    await waitFor(async () => (await taskState(taskId, sb)) === 'failed', 'the task to end');
    const r = await cli(['logs', sb, taskId, '--json']);
    expect(r.code).toBe(3);
    expect(r.stderr).toBe('');
    const { chunks, end } = parseLogs(r.stdout);
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((c) => c.text).join('')).toBe(output);
    expect(expectContiguous(chunks, 0)).toBe(Buffer.byteLength(output));
    expect(end).toEqual({ state: 'failed', exit_code: 3, next_offset: Buffer.byteLength(output) });

    // A chunk's offset is where --from resumes.
    const resumed = parseLogs((await cli(['logs', sb, taskId, '--json', '--from', String(chunks[1]!.offset)])).stdout);
    expect(resumed.chunks.map((c) => c.text).join('')).toBe(
      chunks
        .slice(1)
        .map((c) => c.text)
        .join(''),
    );
    expectContiguous(resumed.chunks, chunks[1]!.offset);
  });

  it('logs --follow --json prints each chunk as it comes and ends with the task code as its exit status', async () => {
    // As the test without --json: each line waits for a file the test creates once it is printed.
    const taskId = await startTask('for i in 1 2 3; do echo line$i; until [ -e go$i ]; do sleep 0.1; done; done; exit 5', 300, sb);
    const run = spawnCli(['logs', `local:${sb}`, taskId, '--follow', '--json']);
    const printed = () =>
      run
        .stdout()
        .split('\n')
        .filter(Boolean)
        .map((l) => LogsChunkSchema.parse(JSON.parse(l)).text)
        .join('');
    let expected = '';
    for (const i of [1, 2, 3]) {
      expected += `line${i}\n`;
      await waitFor(() => printed() === expected, `chunk ${i} on the CLI's stdout while the task waits`);
      await provider.writeFile(sb, `go${i}`, Buffer.alloc(0));
    }
    expect(await run.exited).toBe(5);
    expect(run.stderr()).toBe('');
    const { chunks, end } = parseLogs(run.stdout());
    expect(expectContiguous(chunks, 0)).toBe(expected.length);
    expect(end).toEqual({ state: 'failed', exit_code: 5, next_offset: expected.length });
  });

  it('Ctrl-C ends logs --follow --json with 130: no end object (the task has not ended), no note, the task running', async () => {
    const taskId = await startTask('echo started; sleep 600', 300, sb);
    const run = spawnCli(['logs', sb, taskId, '-f', '--json'], { detached: true });
    await waitFor(() => run.stdout().endsWith('\n'), 'the first chunk');
    const group = -run.child.pid!;
    try {
      process.kill(group, 'SIGINT');
      expect(await run.exited).toBe(130);
      expect(run.stdout()).toBe(JSON.stringify({ stream: 'stdout', offset: 0, text: 'started\n' }) + '\n');
      expect(run.stderr()).toBe('');
      expect(await taskState(taskId, sb)).toBe('running');
    } finally {
      try {
        process.kill(group, 'SIGKILL');
      } catch {
        // The group is gone: nothing of the CLI's is left behind.
      }
    }
  });

  it('cancel --json: a running task confirmed cancelled, a finished one with its state and exit code', async () => {
    const running = await startTask('sleep 600', 300, sb);
    const c = await cli(['cancel', sb, running, '--json']);
    expect(c.code).toBe(0);
    expect(c.stderr).toBe('');
    expect(CancelResultSchema.parse(JSON.parse(c.stdout))).toMatchObject({
      sandbox_id: `local:${sb}`,
      task_id: running,
      state: 'cancelled',
      confirmed: true,
    });

    const finished = await startTask('exit 4', 300, sb);
    await waitFor(async () => (await taskState(finished, sb)) === 'failed', 'the task to fail');
    const f = await cli(['cancel', sb, finished, '--json']);
    expect({ code: f.code, stderr: f.stderr }).toEqual({ code: 0, stderr: '' });
    expect(CancelResultSchema.parse(JSON.parse(f.stdout))).toEqual({
      sandbox_id: `local:${sb}`,
      task_id: finished,
      state: 'failed',
      exit_code: 4,
      confirmed: true,
    });
  });

  it('kill --json: one object naming the sandbox, which is gone', async () => {
    const k = await cli(['kill', sb, '--json']);
    expect({ code: k.code, stderr: k.stderr }).toEqual({ code: 0, stderr: '' });
    expect(KillResultSchema.parse(JSON.parse(k.stdout))).toEqual({ sandbox_id: `local:${sb}`, killed: true });
    await expect(provider.getInfo(sb)).rejects.toMatchObject({ category: 'not_found' });
  });
});

describe('against the e2b fake', () => {
  let fake: FakeE2b;
  beforeAll(async () => {
    fake = await startFakeE2b();
  });
  afterAll(async () => {
    await fake?.close();
  });

  // A bound for a broken run: 24 s at most in 48 runs of the suite (5 s typically).
  it('ls, logs, cancel and kill work on e2b sandboxes through the same agent protocol', async () => {
    const server = await connectStdio(fake.env, ['--provider', 'e2b']);
    let sb: string;
    let taskId: string;
    let longTaskId: string;
    try {
      sb = (await ok(server.client, 'create_sandbox', {})).sandbox_id;
      taskId = (await ok(server.client, 'start_task', { command: 'echo from-e2b; exit 3' })).task_id;
      longTaskId = (await ok(server.client, 'start_task', { command: 'sleep 300' })).task_id;
    } finally {
      await server.close();
    }
    const env = fake.env;
    const listed = ListingSchema.parse(JSON.parse((await cli(['ls', '--provider', 'e2b', '--json'], env)).stdout));
    expect(listed.sandboxes.map((s) => s.sandbox_id)).toContain(sb);
    const logs = await cli(['logs', sb, taskId, '--follow'], env);
    expect(logs).toEqual({ code: 3, stdout: 'from-e2b\n', stderr: `sandbox-mcp: task ${taskId} failed, exit code 3\n` });
    expect((await cli(['ls', '--provider', 'e2b'], env)).stdout).toContain(taskId);
    expect(await cli(['cancel', sb, longTaskId], env)).toEqual({ code: 0, stdout: `task ${longTaskId} cancelled\n`, stderr: '' });
    const ended = await cli(['cancel', sb, taskId, '--json'], env);
    expect(ended).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(ended.stdout)).toEqual({ sandbox_id: sb, task_id: taskId, state: 'failed', exit_code: 3, confirmed: true });
    expect(await cli(['kill', sb], env)).toEqual({ code: 0, stdout: `killed ${sb}\n`, stderr: '' });
    expect(fake.sandbox(sb.replace(/^e2b:/, ''))).toBeUndefined();
  }, 180_000);
});
