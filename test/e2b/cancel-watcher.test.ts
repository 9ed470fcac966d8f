// The e2b cancel watcher on real commands in a fake sandbox: on abort it sends the wrapper TERM
// through a second envd command, gives up after its bound (SIGKILL to the command, outcome
// unknown), and does nothing once disposed.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import type { CommandHandle, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { GAVE_UP_EXIT, watchCancel } from '../../host/providers/e2b/cancel-watcher.js';
import { waitFor } from '../support/wait.js';
import { startSdkWorld, type SdkWorld } from '../support/e2b-sdk-world.js';
import { isRunning } from '../support/processes.js';

let world: SdkWorld;
let sandbox: Sandbox;

beforeAll(async () => {
  world = await startSdkWorld();
  sandbox = await world.newSandbox(300);
});
afterAll(async () => {
  await world?.close();
});

/** A command that records each TERM in `$HOME/<name>` and keeps running; resolves once its trap is set. */
async function termRecorder(): Promise<{ handle: CommandHandle; terms: () => string }> {
  const name = `terms-${randomBytes(4).toString('hex')}`;
  const home = world.fake.sandbox(sandbox.sandboxId)!.home;
  const handle = await sandbox.commands.run(
    `trap 'echo TERM >> "$HOME/${name}"' TERM; : > "$HOME/${name}.ready"; while :; do sleep 0.05; done`,
    {
      background: true,
      timeoutMs: 0,
    },
  );
  await waitFor(() => existsSync(`${home}/${name}.ready`), 'the command to be ready');
  return { handle, terms: () => (existsSync(`${home}/${name}`) ? readFileSync(`${home}/${name}`, 'utf8') : '') };
}

const signalStarts = (mark: number) =>
  world.fake.envdCalls.slice(mark).filter((c) => c.path === '/process.Process/Start' && c.sandboxId === sandbox.sandboxId).length;

describe('watchCancel', () => {
  test('an abort TERMs the command; if it does not report, the watcher gives up, SIGKILLs it, outcome unknown', async () => {
    const { handle, terms } = await termRecorder();
    const ac = new AbortController();
    const watch = watchCancel(sandbox, handle, ac.signal, { giveUpAfterMs: 3000, signalTimeoutMs: 5000 });
    expect(watch.isRequested).toBe(false);
    ac.abort();
    expect(watch.isRequested).toBe(true);
    await waitFor(() => terms() === 'TERM\n', 'the TERM to arrive');
    // The recorder ignores TERM, so the watcher gives up.
    expect(await watch.gaveUp).toBe(GAVE_UP_EXIT);
    await waitFor(() => !isRunning(handle.pid), 'the command to end');
    watch.dispose();
  });

  test('an already aborted signal is acted on at once, with one signalling command', async () => {
    const { handle, terms } = await termRecorder();
    const mark = world.fake.envdCalls.length;
    const watch = watchCancel(sandbox, handle, AbortSignal.abort(), { giveUpAfterMs: 3000, signalTimeoutMs: 5000 });
    expect(watch.isRequested).toBe(true);
    await waitFor(() => terms() === 'TERM\n', 'the TERM to arrive');
    expect(await watch.gaveUp).toBe(GAVE_UP_EXIT);
    expect(signalStarts(mark)).toBe(1);
    watch.dispose();
  });

  test('a disposed watch neither signals nor gives up when the signal aborts later', async () => {
    const { handle, terms } = await termRecorder();
    try {
      const ac = new AbortController();
      const watch = watchCancel(sandbox, handle, ac.signal, { giveUpAfterMs: 1, signalTimeoutMs: 5000 });
      watch.dispose();
      const mark = world.fake.envdCalls.length;
      ac.abort();
      expect(watch.isRequested).toBe(false);
      // A command that does exit is the proof the sandbox is still answering; nothing was sent before it.
      await sandbox.commands.run('true');
      expect(signalStarts(mark)).toBe(1);
      expect(terms()).toBe('');
      expect(isRunning(handle.pid)).toBe(true);
    } finally {
      await handle.kill();
    }
  });
});
