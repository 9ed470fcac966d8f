// "A submission whose outcome is uncertain returns state unknown with the same handle", against a
// real local sandbox without a resident agent (as sandboxes of older servers are): the agent exec
// that carries start_task is killed after the real agent started the task and before its answer
// reaches the server. The fault is made inside the sandbox, with the sandbox user's own rights:
// the installed agent is swapped for a one-shot wrapper that runs the real agent, puts it back,
// and dies by SIGKILL without passing the answer on. Through a resident agent, a start whose
// resident is killed mid-submission is asked again as a per-call agent, which reports the task
// that really started — and the task goes on under its supervisor, with every byte.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AGENT_INSTALL_DIR } from '../../host/providers/agent-bundle.js';
import type { ResidentRecord } from '../../host/providers/local/keeper/resident.js';
import { RESIDENT_FILE } from '../../host/providers/local/sandbox/state-dir.js';
import { agentRuntimeArgv } from '../../shared/agent-runtime.js';
import { localServers, ok, toolError } from '../support/built-server.js';
import { REPO } from '../support/paths.js';
import { waitFor } from '../support/wait.js';

const servers = localServers();

// Under the sandbox's agent runtime node's executable is its loader, which needs node named again.
const WRAPPER = `// One-shot fault: the real agent runs (and may start a task), then its answer is lost.
const { spawnSync } = require('node:child_process');
const { renameSync } = require('node:fs');
const real = __filename + '.real';
const runtime = ${JSON.stringify(agentRuntimeArgv())};
const node = process.execPath === runtime[0] ? runtime.slice(1) : [];
spawnSync(process.execPath, [...node, real, ...process.argv.slice(2)], { stdio: ['ignore', 'ignore', 'inherit'] });
renameSync(real, __filename);
process.kill(process.pid, 'SIGKILL');
`;

describe('an uncertain start_task submission (local sandbox)', () => {
  it('answers `unknown` with the handle of the task that really started, and retains the sandbox (no resident agent)', async () => {
    const first = await servers.connect({ SANDBOX_MCP_RESIDENT_AGENT: '0' });
    const sandbox = (await ok(first.client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
    // Any task call installs this build's agent in the sandbox; a get_task retains nothing.
    const absent = await toolError(first.client, 'get_task', { sandbox_id: sandbox, task_id: '0'.repeat(32) });
    expect(absent.category).toBe('not_found');

    const agentFile = JSON.parse(readFileSync(join(REPO, 'dist/agent-manifest.json'), 'utf8')).file_name as string;
    const installed = `${AGENT_INSTALL_DIR}/${agentFile}`;
    await ok(first.client, 'run_command', { sandbox_id: sandbox, command: `mv -f ~/${installed} ~/${installed}.real` });
    await ok(first.client, 'write_file', { sandbox_id: sandbox, path: `~/${installed}`, content: WRAPPER });

    const started = await ok(first.client, 'start_task', {
      sandbox_id: sandbox,
      command: 'echo started; while [ ! -e ~/go ]; do sleep 0.05; done; echo finished',
      timeout: 120,
    });
    expect(started).toMatchObject({ sandbox_id: sandbox, state: 'unknown', exit_code: null, error: { code: 'agent_failed' } });
    expect(started.task_id).toMatch(/^[0-9a-f]{32}$/);
    expect(first.stderr()).toContain('task submission uncertain');

    // The start held the sandbox: it outlives the session that created it.
    await first.close();
    const second = await servers.connect();
    expect((await ok(second.client, 'get_sandbox', { sandbox_id: sandbox })).status).toBe('running');

    // The handle is the real task's: inspect it instead of resubmitting.
    const handle = { sandbox_id: sandbox, task_id: started.task_id as string };
    await waitFor(async () => (await ok(second.client, 'get_task', { ...handle, wait: 5 })).stdout === 'started\n', 'the task to start');
    await ok(second.client, 'write_file', { sandbox_id: sandbox, path: 'go', content: '' });
    let view: Record<string, any> = {};
    await waitFor(async () => {
      view = await ok(second.client, 'get_task', { ...handle, wait: 5 });
      return view.state !== 'running';
    }, 'the task to finish');
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'started\nfinished\n' });
    await ok(second.client, 'kill_sandbox', { sandbox_id: sandbox });
  });

  it('through a resident killed -9 mid-submission: asked again, it reports the real task, which finishes with every byte', async () => {
    const s = await servers.connect();
    // A settle window longer than the test: the resident holds the start until it is killed.
    const sandbox = (await ok(s.client, 'create_sandbox', { timeout: 600, envs: { SANDBOX_AGENT_START_SETTLE_MS: '300000' } }))
      .sandbox_id as string;
    const dir = join(servers.stateDir, 'local', sandbox.replace(/^local:/, ''));
    const residentOf = () => {
      try {
        return JSON.parse(readFileSync(join(dir, RESIDENT_FILE), 'utf8')) as ResidentRecord;
      } catch {
        return null;
      }
    };
    const before = await waitFor(() => (residentOf()?.resident ? residentOf() : null), 'the resident to run');
    const starting = ok(s.client, 'start_task', {
      sandbox_id: sandbox,
      command: 'for i in $(seq 1 2000); do echo "line $i"; done; while [ ! -e ~/go ]; do sleep 0.05; done; echo finished',
      timeout: 120,
    });
    // The task runs (its directory is there, its first lines are out) while the start is in flight.
    const tasks = '~/.local/state/sandbox-agent/tasks';
    await waitFor(
      async () =>
        (
          await ok(s.client, 'run_command', {
            sandbox_id: sandbox,
            command: `cat ${tasks}/*/stdout.log 2>/dev/null | wc -l`,
            background_after: 0,
          })
        ).stdout.trim() === '2000',
      'the task to print',
    );
    process.kill(before.resident!.pid, 'SIGKILL');
    const started = await starting;
    expect(started).toMatchObject({ sandbox_id: sandbox, state: 'running' });
    const handle = { sandbox_id: sandbox, task_id: started.task_id as string };
    await ok(s.client, 'write_file', { sandbox_id: sandbox, path: 'go', content: '' });
    let view: Record<string, any> = {};
    await waitFor(async () => {
      view = await ok(s.client, 'get_task', { ...handle, wait: 5 });
      return view.state !== 'running';
    }, 'the task to finish');
    const lines = Array.from({ length: 2000 }, (_, i) => `line ${i + 1}\n`).join('');
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0 });
    expect(view.stdout_size).toBe(Buffer.byteLength(lines + 'finished\n'));
    let all = '';
    for (let offset = 0; offset < view.stdout_size;) {
      const page = await ok(s.client, 'get_task', { ...handle, stdout_offset: offset, limit: 65536 });
      all += page.stdout;
      offset = page.stdout_next_offset;
    }
    expect(all).toBe(lines + 'finished\n');
    // The keeper started the resident again.
    await waitFor(() => {
      const now = residentOf();
      return now !== null && now.resident !== null && now.restarts > before.restarts;
    }, 'the resident to be back');
    await ok(s.client, 'kill_sandbox', { sandbox_id: sandbox });
  });
});
