// The secret-named `envs` a run_command call passes join that sandbox's masking: masked in the
// call's own output, in later command and task output of the same sandbox, and nowhere else.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { localServer, ok } from '../support/built-server.js';

const s = localServer();

/** A fresh sandbox of this session, by explicit id. */
const newSandbox = async (): Promise<string> => (await ok(s.client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;

describe('secret-named run_command envs', () => {
  it("are masked in the call's own stdout and stderr; other names are shown", async () => {
    const sandbox = await newSandbox();
    const token = 'tok-' + randomBytes(12).toString('hex');
    const password = 'pw-' + randomBytes(12).toString('hex');
    const r = await ok(s.client, 'run_command', {
      sandbox_id: sandbox,
      command: 'echo "$DEPLOY_TOKEN $db_password $PLAIN"; echo "$DEPLOY_TOKEN" >&2',
      envs: { DEPLOY_TOKEN: token, db_password: password, PLAIN: 'plain-value' },
    });
    expect(r).toMatchObject({ exit_code: 0, stdout: '[MASKED] [MASKED] plain-value\n', stderr: '[MASKED]\n' });
    expect(s.stderr()).not.toContain(token);
  });

  it("mask that sandbox's later command and task output, and no other sandbox's", async () => {
    const sandbox = await newSandbox();
    const other = await newSandbox();
    const key = 'key-' + randomBytes(12).toString('hex');
    await ok(s.client, 'run_command', { sandbox_id: sandbox, command: 'true', envs: { SERVICE_API_KEY: key } });

    // The value now comes from a file, not from a variable the sandbox knows.
    await ok(s.client, 'write_file', { sandbox_id: sandbox, path: 'leak.txt', content: `${key}\n` });
    expect((await ok(s.client, 'run_command', { sandbox_id: sandbox, command: 'cat leak.txt' })).stdout).toBe('[MASKED]\n');
    expect((await ok(s.client, 'run_code', { sandbox_id: sandbox, language: 'bash', code: 'cat leak.txt >&2' })).stderr).toBe('[MASKED]\n');
    const task = await ok(s.client, 'start_task', { sandbox_id: sandbox, command: 'cat leak.txt' });
    let page = task;
    for (let i = 0; i < 20 && page.state === 'running'; i++) {
      page = await ok(s.client, 'get_task', { sandbox_id: sandbox, task_id: task.task_id, wait: 5 });
    }
    expect([page.state, page.stdout]).toEqual(['succeeded', '[MASKED]\n']);

    // Another sandbox's output is not shaped by this sandbox's values.
    expect((await ok(s.client, 'run_command', { sandbox_id: other, command: `echo ${key}` })).stdout).toBe(`${key}\n`);
  });
});
