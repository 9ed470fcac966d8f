// The session rules (ownership, default, renewal, cleanup), driven through the real tool handlers
// (callTool) with a recording provider whose calls the test can hold open — the only way to pin
// in-flight races deterministically. Real sandboxes cover the same tools end to end in test/e2e/.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { BACKGROUND_AFTER_DEFAULT_S } from '../../host/config/config.js';
import { ProviderError } from '../../host/providers/provider-error.js';
import { createLogger } from '../../host/util/log.js';
import { SecretMasker } from '../../host/mcp/mask.js';
import { TaskRetention } from '../../host/tasks/retention.js';
import { OwnerCache } from '../../host/access/owner-scope.js';
import { WorkspacePaths } from '../../host/tasks/workspace-changes.js';
import { waitFor } from '../support/wait.js';
import { WaitGate } from '../../host/tasks/wait-gate.js';
import type { AgentChannel, Provider } from '../../host/providers/provider.js';
import type { TaskSummary } from '../../shared/protocol.js';
import type { ResidentHello } from '../../shared/resident.js';
import { runningSandbox } from '../support/running-sandbox.js';
import { closeSession, TASK_CHECK_MS } from '../../host/mcp/session-close.js';
import { callTool } from '../../host/mcp/tool-call.js';
import { Session } from '../../host/mcp/session.js';
import type { ServerDeps } from '../../host/mcp/server-deps.js';

interface Call {
  op: string;
  id?: string;
  timeoutS?: number;
  isStartSkipped?: boolean;
}

/** A finished task as an agent's `list` shows it. */
function finishedTask(taskId: string): TaskSummary {
  return {
    task_id: taskId,
    state: 'succeeded',
    exit_code: 0,
    started_at: 1_767_225_600,
    finished_at: 1_767_225_601,
    stdout_size: 3,
    stderr_size: 0,
    stdout_truncated: false,
    stderr_truncated: false,
  };
}

/**
 * A provider that records every call; `hold` makes the named op wait until released. Its sandboxes
 * have a resident agent that answers only `list` (session close's task check), with the tasks in
 * `listed` (none by default); every other agent op goes through exec, as without a resident.
 */
function recordingProvider() {
  const calls: Call[] = [];
  const listed = new Map<string, TaskSummary[]>();
  /** end_at each sandbox reports, by id (none: null, unknown). */
  const endAtMs = new Map<string, number>();
  const held = new Map<string, { release: () => void; failWith?: ProviderError }>();
  const holds = new Map<string, Promise<void>>();
  let n = 0;
  const gate = async (op: string) => {
    const h = holds.get(op);
    if (h) {
      holds.delete(op);
      await h;
      const f = held.get(op)?.failWith;
      held.delete(op);
      if (f) throw f;
    }
  };
  const provider: Provider = {
    id: 'local',
    async create(o) {
      calls.push({ op: 'create', ...(o.timeoutS !== undefined ? { timeoutS: o.timeoutS } : {}) });
      await gate('create');
      return runningSandbox(`sb${++n}`);
    },
    async list() {
      return [];
    },
    async getInfo(id) {
      calls.push({ op: 'getInfo', id });
      const end = endAtMs.get(id);
      return { ...runningSandbox(id), end_at: end === undefined ? null : new Date(end).toISOString() };
    },
    async setTimeout(id, timeoutS) {
      calls.push({ op: 'setTimeout', id, timeoutS });
      await gate('setTimeout');
    },
    async kill(id) {
      calls.push({ op: 'kill', id });
    },
    async getOwner() {
      return null;
    },
    async getEnvironment() {
      return {};
    },
    async exec(id) {
      calls.push({ op: 'exec', id });
      return {
        exitCode: 0,
        stdout: Buffer.alloc(0),
        stderr: Buffer.alloc(0),
        stdoutTruncated: false,
        stderrTruncated: false,
        stdoutHeadBytes: 0,
        stderrHeadBytes: 0,
        timedOut: false,
      };
    },
    async readFile() {
      return { data: Buffer.alloc(0), size: 0 };
    },
    async writeFile() {
      return { size: 0 };
    },
    async listFiles() {
      return [];
    },
    async exposePort() {
      return { url: 'http://127.0.0.1:1/' };
    },
    async describeNetwork() {
      return { egress: 'none', allow_out: [], proxy: null, exposed_ports: [] };
    },
    async agentChannel(id, o): Promise<AgentChannel> {
      return {
        hello: { ops: ['list'] } as ResidentHello,
        supports: (op) => op === 'list',
        async request() {
          calls.push({ op: 'list', id, ...(o?.isStartSkipped !== undefined ? { isStartSkipped: o.isStartSkipped } : {}) });
          await gate('list');
          return { protocol: 1, ok: true, result: { tasks: listed.get(id) ?? [], truncated: false } };
        },
      };
    },
    async close() {},
  };
  return {
    provider,
    calls,
    endAtMs,
    listed,
    /** The next call of `op` waits until the returned function is called. */
    hold(op: string, failWith?: ProviderError): () => void {
      let release!: () => void;
      holds.set(op, new Promise<void>((r) => (release = r)));
      held.set(op, { release, ...(failWith ? { failWith } : {}) });
      return () => release();
    },
  };
}

function deps(provider: Provider, logLines: Record<string, unknown>[] = []): ServerDeps {
  return {
    config: { defaultProvider: 'local', localNetwork: 'isolated', e2b: {}, backgroundAfterS: BACKGROUND_AFTER_DEFAULT_S, secretValues: [] },
    providers: { get: () => provider },
    agent: new AgentClient({ bytes: Buffer.from(''), fileName: 'agent-test.cjs', version: 'test' }),
    masker: new SecretMasker(),
    retention: new TaskRetention(),
    waits: new WaitGate(4),
    owners: new OwnerCache(),
    workspaces: new WorkspacePaths(),
    log: createLogger({ write: (line) => void logLines.push(JSON.parse(line) as Record<string, unknown>) }),
  };
}

const renewals = (calls: Call[]) => calls.filter((c) => c.op === 'setTimeout').map((c) => c.timeoutS);

describe('session renewal policy and ownership', () => {
  it('renews owned sandboxes with the create timeout, then with the last successful set_sandbox_timeout', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', { timeout: 120 });
    await callTool({ deps: d, session }, 'run_command', { command: 'true' });
    expect(renewals(p.calls)).toEqual([120]);

    await callTool({ deps: d, session }, 'set_sandbox_timeout', { timeout: 600 });
    await callTool({ deps: d, session }, 'read_file', { path: 'x' });
    expect(renewals(p.calls)).toEqual([120, 600, 600]);

    // A failed platform update leaves the previous policy intact.
    const release = p.hold('setTimeout', new ProviderError('unavailable'));
    const failed = callTool({ deps: d, session }, 'set_sandbox_timeout', { timeout: 900 });
    release();
    expect((await failed).isError).toBe(true);
    await callTool({ deps: d, session }, 'list_files', { path: '.' });
    expect(renewals(p.calls)).toEqual([120, 600, 600, 900, 600]);
  });

  it('never shortens: a lifetime already ending after the renewal would is left alone; an earlier one is renewed', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', { timeout: 120 });
    // Someone else (the dashboard, another session's explicit set_sandbox_timeout) gave it a day.
    p.endAtMs.set('sb1', Date.now() + 86_400_000);
    await callTool({ deps: d, session }, 'run_command', { command: 'true' });
    await callTool({ deps: d, session }, 'write_file', { path: 'x', content: 'y' });
    expect(renewals(p.calls)).toEqual([]);
    // Ending sooner than the renewal would set: renewed as before.
    p.endAtMs.set('sb1', Date.now() + 60_000);
    await callTool({ deps: d, session }, 'run_command', { command: 'true' });
    expect(renewals(p.calls)).toEqual([120]);
    // The owner's own set_sandbox_timeout may still shorten it.
    p.endAtMs.set('sb1', Date.now() + 86_400_000);
    await callTool({ deps: d, session }, 'set_sandbox_timeout', { timeout: 30 });
    expect(renewals(p.calls)).toEqual([120, 30]);
  });

  it('leaves a lifetime that ends within a tenth of the renewal (at most a minute) short of it: a burst of calls writes it once', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', { timeout: 1200 });
    // Renewed a moment ago: 2 s short of a fresh renewal's end, within the slack (a minute here).
    p.endAtMs.set('sb1', Date.now() + 1198_000);
    await callTool({ deps: d, session }, 'run_command', { command: 'true' });
    await callTool({ deps: d, session }, 'read_file', { path: 'x' });
    expect(renewals(p.calls)).toEqual([]);
    // Beyond it (70 s short): renewed.
    p.endAtMs.set('sb1', Date.now() + 1130_000);
    await callTool({ deps: d, session }, 'run_command', { command: 'true' });
    expect(renewals(p.calls)).toEqual([1200]);
    // A short renewal has a short slack: a tenth of 20 s is 2 s, so 5 s short is renewed.
    await callTool({ deps: d, session }, 'set_sandbox_timeout', { timeout: 20 });
    p.endAtMs.set('sb1', Date.now() + 15_000);
    await callTool({ deps: d, session }, 'write_file', { path: 'x', content: 'y' });
    expect(renewals(p.calls)).toEqual([1200, 20, 20]);
    p.endAtMs.set('sb1', Date.now() + 19_000);
    await callTool({ deps: d, session }, 'list_files', { path: '.' });
    expect(renewals(p.calls)).toEqual([1200, 20, 20]);
  });

  it('never renews or adopts sandboxes referenced by explicit id, and task tools never renew', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'run_command', { command: 'true', sandbox_id: 'local:other' });
    await callTool({ deps: d, session }, 'get_sandbox', { sandbox_id: 'local:other' });
    await callTool({ deps: d, session }, 'set_sandbox_timeout', { sandbox_id: 'local:other', timeout: 50 });
    await callTool({ deps: d, session }, 'get_task', { sandbox_id: 'local:other', task_id: 'a'.repeat(32) });
    await callTool({ deps: d, session }, 'create_sandbox', {});
    await callTool({ deps: d, session }, 'start_task', { command: 'sleep 1' });
    await callTool({ deps: d, session }, 'cancel_task', { sandbox_id: 'local:sb1', task_id: 'a'.repeat(32) });
    // Only the explicit set_sandbox_timeout touched a lifetime.
    expect(renewals(p.calls)).toEqual([50]);
    expect(session.defaultSandbox).toBe('local:sb1');
    // At close: the explicit one is not ours; sb1 is retained by its task.
    await closeSession(d, session);
    expect(p.calls.filter((c) => c.op === 'kill')).toEqual([]);
  });

  it('a set_sandbox_timeout completing after the session closed restores nothing', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', { timeout: 100 });
    const release = p.hold('setTimeout');
    const inFlight = callTool({ deps: d, session }, 'set_sandbox_timeout', { timeout: 700 });
    await closeSession(d, session);
    release();
    expect((await inFlight).isError).toBeFalsy();
    expect(session.renewalFor('local:sb1')).toBeUndefined();
    expect(session.defaultSandbox).toBeUndefined();
    expect(p.calls.filter((c) => c.op === 'kill').map((c) => c.id)).toEqual(['sb1']);
  });

  it('a create_sandbox completing after the session closed destroys its sandbox', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    const release = p.hold('create');
    const inFlight = callTool({ deps: d, session }, 'create_sandbox', {});
    await closeSession(d, session);
    release();
    const r = await inFlight;
    expect(r.isError).toBe(true);
    expect(p.calls.filter((c) => c.op === 'kill').map((c) => c.id)).toEqual(['sb1']);
    expect(session.defaultSandbox).toBeUndefined();
  });

  it('kill_sandbox forgets the sandbox and clears the default', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    await callTool({ deps: d, session }, 'kill_sandbox', {});
    expect(session.defaultSandbox).toBeUndefined();
    await closeSession(d, session);
    expect(p.calls.filter((c) => c.op === 'kill')).toHaveLength(1);
  });
});

describe('start_task submission outcomes', () => {
  it('answers `unknown` with the same handle when the submission times out, and still retains the sandbox', async () => {
    const p = recordingProvider();
    p.provider.exec = async (id) => {
      p.calls.push({ op: 'exec', id });
      throw new ProviderError('timeout');
    };
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    const r = await callTool({ deps: d, session }, 'start_task', { command: 'sleep 5' });
    expect(r.isError).toBeFalsy();
    const view = r.structuredContent as { state: string; task_id: string; sandbox_id: string; error?: { code: string } };
    expect(view.state).toBe('unknown');
    expect(view.task_id).toMatch(/^[0-9a-f]{32}$/);
    expect(view.sandbox_id).toBe('local:sb1');
    expect(view.error?.code).toBe('timeout');
    await closeSession(d, session);
    expect(p.calls.filter((c) => c.op === 'kill')).toEqual([]);
  });

  it('reports a certain refusal (sandbox gone) as a tool error', async () => {
    const p = recordingProvider();
    p.provider.exec = async () => {
      throw new ProviderError('not_found');
    };
    const d = deps(p.provider);
    const r = await callTool({ deps: d, session: new Session() }, 'start_task', { sandbox_id: 'local:gone', command: 'true' });
    expect(r.isError).toBe(true);
    expect(JSON.parse((r.content[0] as { text: string }).text).error.category).toBe('not_found');
  });
});

describe('task retention', () => {
  const kills = (calls: Call[]) => calls.filter((c) => c.op === 'kill').map((c) => c.id);

  it('a start_task that certainly failed does not retain the sandbox', async () => {
    const p = recordingProvider();
    p.provider.exec = async () => {
      throw new ProviderError('invalid_argument', { code: 'invalid_request' });
    };
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    expect((await callTool({ deps: d, session }, 'start_task', { command: 'true', cwd: '/nonexistent' })).isError).toBe(true);
    await closeSession(d, session);
    expect(kills(p.calls)).toEqual(['sb1']);
  });

  it('a start in flight at close holds the sandbox, which is destroyed if the start then fails', async () => {
    const p = recordingProvider();
    let fail: (() => void) | undefined;
    p.provider.exec = () => new Promise((_, reject) => (fail = () => reject(new ProviderError('not_found'))));
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    const inFlight = callTool({ deps: d, session }, 'start_task', { command: 'true' });
    await closeSession(d, session);
    expect(kills(p.calls)).toEqual([]);
    // The submission reaches the provider once the start has read what it needs (secrets, the default cwd).
    await waitFor(() => fail !== undefined, 'the start to submit');
    expect(kills(p.calls)).toEqual([]);
    fail!();
    expect((await inFlight).isError).toBe(true);
    expect(kills(p.calls)).toEqual(['sb1']);
  });

  it('a task started from another session of the process retains the sandbox', async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const owner = new Session();
    const other = new Session();
    await callTool({ deps: d, session: owner }, 'create_sandbox', {});
    await callTool({ deps: d, session: other }, 'start_task', { sandbox_id: 'local:sb1', command: 'sleep 9' });
    await closeSession(d, owner);
    expect(kills(p.calls)).toEqual([]);
  });
});

describe('kill_sandbox', () => {
  it('forgets a default that turned out to be gone already', async () => {
    const p = recordingProvider();
    p.provider.kill = async () => {
      throw new ProviderError('not_found');
    };
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    const r = await callTool({ deps: d, session }, 'kill_sandbox', {});
    // Idempotent: already gone is what was asked for.
    expect(r.isError).toBeUndefined();
    expect(r.structuredContent).toEqual({ success: true, sandbox_id: 'local:sb1', destroyed: false });
    expect(session.defaultSandbox).toBeUndefined();
  });
});

describe('tasks another server process started, at session close', () => {
  const kills = (calls: Call[]) => calls.filter((c) => c.op === 'kill').map((c) => c.id);
  const closedLine = (lines: Record<string, unknown>[]) => lines.find((l) => l.msg === 'session closed');
  afterEach(() => void vi.useRealTimers());

  it('keeps a sandbox whose agent lists a task, destroys one whose agent lists none, and says so', async () => {
    const p = recordingProvider();
    const lines: Record<string, unknown>[] = [];
    const d = deps(p.provider, lines);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    await callTool({ deps: d, session }, 'create_sandbox', {});
    // Finished counts as much as running: its output is what the other process may still read.
    p.listed.set('sb1', [finishedTask('b'.repeat(32))]);
    await closeSession(d, session);
    expect(kills(p.calls)).toEqual(['sb2']);
    // Asked without starting a resident for it.
    expect(p.calls.filter((c) => c.op === 'list')).toEqual([
      { op: 'list', id: 'sb1', isStartSkipped: true },
      { op: 'list', id: 'sb2', isStartSkipped: true },
    ]);
    expect(closedLine(lines)).toMatchObject({ destroyed: 1, kept: 1, holding_tasks: 1, unanswered: 0 });
  });

  it('destroys a sandbox the agent says is gone (killed meanwhile), without a warning', async () => {
    const p = recordingProvider();
    p.provider.kill = async (id) => {
      p.calls.push({ op: 'kill', id });
      throw new ProviderError('not_found');
    };
    const lines: Record<string, unknown>[] = [];
    const d = deps(p.provider, lines);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    p.hold('list', new ProviderError('not_found'))();
    await closeSession(d, session);
    expect(kills(p.calls)).toEqual(['sb1']);
    expect(lines.filter((l) => l.level === 'warn')).toEqual([]);
    expect(closedLine(lines)).toMatchObject({ destroyed: 1, kept: 0, unanswered: 0 });
  });

  it('keeps a sandbox whose agent fails to answer', async () => {
    const p = recordingProvider();
    const lines: Record<string, unknown>[] = [];
    const d = deps(p.provider, lines);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    p.hold('list', new ProviderError('internal', { code: 'agent_failed' }))();
    await closeSession(d, session);
    expect(kills(p.calls)).toEqual([]);
    expect(closedLine(lines)).toMatchObject({ destroyed: 0, kept: 1, holding_tasks: 0, unanswered: 1 });
  });

  it('keeps a sandbox whose agent does not answer within the bound, and the close does not wait longer', async () => {
    const p = recordingProvider();
    const lines: Record<string, unknown>[] = [];
    const d = deps(p.provider, lines);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    const release = p.hold('list');
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const closing = closeSession(d, session);
    await vi.waitUntil(() => p.calls.some((c) => c.op === 'list'), { interval: 1 });
    await vi.advanceTimersByTimeAsync(TASK_CHECK_MS);
    await closing;
    expect(kills(p.calls)).toEqual([]);
    expect(closedLine(lines)).toMatchObject({ destroyed: 0, kept: 1, unanswered: 1 });
    release();
  });

  it("does not count the task of this process's run_command that finished in time, which its resident is removing", async () => {
    const p = recordingProvider();
    const d = deps(p.provider);
    const session = new Session();
    await callTool({ deps: d, session }, 'create_sandbox', {});
    // The resident answers first and removes the task after: a close right then still lists it.
    p.provider.execPromotable = async (id, _command, o) => {
      p.listed.set(id, [finishedTask(o.promote.taskId)]);
      return {
        kind: 'finished',
        result: {
          exitCode: 0,
          stdout: Buffer.from('hi\n'),
          stderr: Buffer.alloc(0),
          stdoutTruncated: false,
          stderrTruncated: false,
          stdoutHeadBytes: 3,
          stderrHeadBytes: 0,
          timedOut: false,
        },
      };
    };
    expect((await callTool({ deps: d, session }, 'run_command', { command: 'echo hi' })).structuredContent).toMatchObject({
      stdout: 'hi\n',
    });
    expect(p.listed.get('sb1')).toHaveLength(1);
    await closeSession(d, session);
    expect(kills(p.calls)).toEqual(['sb1']);
  });

  it('counts a task noted as being removed again once it has outlived the note', () => {
    const retention = new TaskRetention();
    retention.noteRemoving('local:sb1', 'c'.repeat(32), 0);
    expect(retention.isRemoving('local:sb1', 'c'.repeat(32), 1000)).toBe(true);
    expect(retention.isRemoving('local:sb2', 'c'.repeat(32), 1000)).toBe(false);
    expect(retention.isRemoving('local:sb1', 'c'.repeat(32), 3_600_000)).toBe(false);
  });
});
