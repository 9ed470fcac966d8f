// A server that did not create a sandbox still masks the secrets it was created with: it learns
// them from the sandbox's own record (local: its spec's create envs; e2b: the environment envd
// gives commands) before it shows any output of that sandbox.
import { afterAll, describe, expect, it } from 'vitest';
import { connectStdio, ok } from '../support/built-server.js';
import { fakeE2bServers } from '../support/fake-e2b-servers.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
const SECRET = 'sk-restart-secret-0123456789';
// Registered first, so it runs last (after hooks run in reverse): once the servers and the fake are closed.
afterAll(() => destroyStateDir(stateDir));
const e2b = fakeE2bServers();

for (const provider of ['local', 'e2b'] as const) {
  describe(`masking after a restart (${provider})`, () => {
    const server = async () => {
      const s = await connectStdio({ SANDBOX_MCP_STATE_DIR: stateDir, ...(provider === 'e2b' ? e2b.fake.env : {}) }, [
        '--provider',
        provider,
      ]);
      e2b.open.push(s);
      return s;
    };

    it('a new server process masks the create-time secret in run_command and task output', async () => {
      const first = await server();
      const sandbox = (await ok(first.client, 'create_sandbox', { timeout: 600, envs: { API_KEY: SECRET } })).sandbox_id as string;
      // A task retains the sandbox past this session.
      await ok(first.client, 'start_task', { command: 'sleep 120', timeout: 300 });
      await first.close();

      const second = await server();
      const echoed = await ok(second.client, 'run_command', { sandbox_id: sandbox, command: 'echo "key=$API_KEY"' });
      expect(echoed.stdout).toBe('key=[MASKED]\n');
      const code = await ok(second.client, 'run_code', { sandbox_id: sandbox, language: 'bash', code: 'echo "$API_KEY" >&2' });
      expect(code.stderr).toBe('[MASKED]\n');
      // Task output is masked in the sandbox too (the supervisor knows its environment).
      await ok(second.client, 'write_file', { sandbox_id: sandbox, path: 'leak.txt', content: SECRET });
      const task = await ok(second.client, 'start_task', { sandbox_id: sandbox, command: 'cat leak.txt', timeout: 60 });
      // `cat` writes its one line at once: the first output read is all of it.
      const page = await waitFor(async () => {
        const view = await ok(second.client, 'get_task', { sandbox_id: sandbox, task_id: task.task_id, wait: 10 });
        return view.stdout !== '' ? view : undefined;
      }, 'the task output');
      expect(page.stdout).toBe('[MASKED]');
      expect(JSON.stringify([echoed, code, page])).not.toContain(SECRET);
      expect(second.stderr()).not.toContain(SECRET);
      await ok(second.client, 'kill_sandbox', { sandbox_id: sandbox });
      await second.close();
    });
  });
}
