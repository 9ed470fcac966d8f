// The e2b commands part on a sandbox the SDK created in the fake: exec under the watchdog wrapper
// (group kill at the timeout, the timed-out rule), the checks made before anything starts, and the
// helper scripts other parts run.
import type { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { checkExecCanStart, createCommands, runHelperScript } from '../../host/providers/e2b/commands.js';
import { waitFor } from '../support/wait.js';
import { startSdkWorld, type SdkWorld } from '../support/e2b-sdk-world.js';
import { isRunning } from '../support/processes.js';

let world: SdkWorld;
let sandbox: Sandbox;
const commands = createCommands({ killGraceS: 1 });

beforeAll(async () => {
  world = await startSdkWorld();
  sandbox = await world.newSandbox(300);
});
afterAll(async () => {
  await world?.close();
});

describe('checkExecCanStart', () => {
  test('refuses a command longer than one argument may be, and an aborted signal', () => {
    expect(() => checkExecCanStart('x'.repeat(121 * 1024), undefined)).toThrow(
      expect.objectContaining({ category: 'invalid_argument', code: 'CommandTooLong' }),
    );
    expect(() => checkExecCanStart('true', AbortSignal.abort())).toThrow(
      expect.objectContaining({ category: 'conflict', code: 'cancelled' }),
    );
    expect(() => checkExecCanStart('x'.repeat(100 * 1024), new AbortController().signal)).not.toThrow();
  });
});

describe('commands.exec', () => {
  test('an aborted signal starts nothing in the sandbox', async () => {
    const mark = world.fake.envdCalls.length;
    await expect(commands.exec(sandbox, 'touch ran', { timeoutS: 5, signal: AbortSignal.abort() })).rejects.toMatchObject({
      code: 'cancelled',
    });
    expect(world.fake.envdCalls.slice(mark)).toEqual([]);
  });

  test('stdout, stderr, exit code, cwd and envs come back; the command itself exiting 124 is not a timeout', async () => {
    await sandbox.commands.run('mkdir -p "$HOME/w"');
    const r = await commands.exec(sandbox, 'echo "$A $PWD"; echo e >&2; exit 124', { timeoutS: 30, cwd: '~/w', envs: { A: 'a' } });
    expect(r).toMatchObject({ exitCode: 124, timedOut: false, stdoutTruncated: false, stderrTruncated: false });
    expect(r.stdout.toString()).toBe(`a ${world.fake.sandbox(sandbox.sandboxId)!.home}/w\n`);
    expect(r.stderr.toString()).toBe('e\n');
    expect(r.stdoutHeadBytes).toBe(r.stdout.length);
  });

  test('at the timeout the whole process group is killed and the result says timed_out', async () => {
    const r = await commands.exec(sandbox, 'sleep 300 & echo $!; sleep 300', { timeoutS: 1 });
    expect(r).toMatchObject({ exitCode: 124, timedOut: true });
    const grandchild = Number(r.stdout.toString().trim());
    expect(grandchild).toBeGreaterThan(1);
    await waitFor(() => !isRunning(grandchild), 'the grandchild to end');
  });

  test('stdin is fed and closed', async () => {
    const r = await commands.exec(sandbox, 'wc -c', { timeoutS: 10, stdin: Buffer.from('12345') });
    expect(r.stdout.toString().trim()).toBe('5');
  });
});

describe('runHelperScript', () => {
  test('returns stdout; a failure is not_found when a path is missing, else internal, with no stderr text', async () => {
    expect(await runHelperScript(sandbox, 'printf "%s" "$X"', { X: 'value' })).toBe('value');
    await expect(runHelperScript(sandbox, 'cat -- "$F"', { F: '/no/such/file' })).rejects.toMatchObject({
      category: 'not_found',
      code: 'ShellHelperFailed',
    });
    const err: unknown = await runHelperScript(sandbox, 'echo secret-detail >&2; exit 3', {}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ category: 'internal', code: 'ShellHelperFailed' });
    expect(JSON.stringify(err) + String(err)).not.toContain('secret-detail');
  });
});
