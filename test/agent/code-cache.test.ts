// The agent's code cache (agent/boot.ts): V8's compiled code of the agent, kept by the agent's
// node processes in their own private state folder and read back by the next ones.
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  lstatSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { encodeRequest } from '../../shared/protocol.js';
import { getRequest, helloRequest } from '../support/agent-requests.js';
import { type AgentWorld, runAgent, startTask, waitTerminal, worldsPerTest } from '../support/agent-world.js';
import { requireBuild } from '../support/prerequisites.js';
import { waitFor } from '../support/wait.js';

beforeAll(() => requireBuild());

const { world } = worldsPerTest();

const cacheDir = (w: AgentWorld) => join(w.stateDir, 'code-cache');
const cacheFiles = (w: AgentWorld, mode: string) =>
  existsSync(cacheDir(w)) ? readdirSync(cacheDir(w)).filter((n) => n.includes(`-${mode}-`) && n.endsWith('.bin')) : [];

/** What the agent said of its code cache (AGENT_DEBUG), and whether the call was answered ok. */
async function getWithCache(w: AgentWorld, taskId: string, env: Record<string, string> = {}): Promise<string> {
  const res = await runAgent(w, ['call', encodeRequest(getRequest(taskId))], { AGENT_DEBUG: '1', ...env });
  expect(JSON.parse(res.stdout)).toMatchObject({ ok: true, result: { task_id: taskId, state: 'succeeded', stdout: 'hi\n' } });
  return /code cache: (.*)$/m.exec(res.stderr)?.[1] ?? '(nothing said)';
}

/** A world with one finished task (so its state folder exists), and the call cache its start wrote. */
async function worldWithTask(): Promise<{ w: AgentWorld; id: string }> {
  const w = world();
  const { task_id: id } = await startTask(w, 'echo hi');
  await waitTerminal(w, id);
  expect(cacheFiles(w, 'call')).toHaveLength(1);
  return { w, id };
}

describe('code cache', () => {
  it('is kept in the private state folder, a file per mode, and read by the next process of that mode', async () => {
    const { w, id } = await worldWithTask();
    expect(await getWithCache(w, id)).toBe('used');
    expect(statSync(cacheDir(w)).mode & 0o777).toBe(0o700);
    // The task's supervisor wrote its own as it exited.
    await waitFor(() => cacheFiles(w, 'supervise').length === 1, "the supervisor's cache");
    for (const name of readdirSync(cacheDir(w))) expect(statSync(join(cacheDir(w), name)).mode & 0o777).toBe(0o600);
    // Other node flags: another file (V8 would refuse the first), which the next such process reads.
    expect(await getWithCache(w, id, { NODE_OPTIONS: '--no-warnings' })).toBe('absent');
    expect(cacheFiles(w, 'call')).toHaveLength(2);
    expect(await getWithCache(w, id, { NODE_OPTIONS: '--no-warnings' })).toBe('used');
  });

  it('is refused when V8 did not make it for this agent, which then compiles as without one and replaces it', async () => {
    const { w, id } = await worldWithTask();
    const file = join(cacheDir(w), cacheFiles(w, 'call')[0]!);
    writeFileSync(file, 'not V8 code');
    expect(await getWithCache(w, id)).toBe('refused');
    expect(readFileSync(file, 'utf8')).not.toBe('not V8 code');
    expect(await getWithCache(w, id)).toBe('used');
  });

  it('is never read from a folder that is not private to the agent, nor written there', async () => {
    const { w, id } = await worldWithTask();
    const file = join(cacheDir(w), cacheFiles(w, 'call')[0]!);
    const before = statSync(file).mtimeMs;
    chmodSync(cacheDir(w), 0o755);
    expect(await getWithCache(w, id)).toBe('absent');
    expect(statSync(file).mtimeMs).toBe(before);
    expect(cacheFiles(w, 'call')).toHaveLength(1);
  });

  it('is read only from a regular file, never through a symlink: a FIFO there stalls nothing, and both are replaced', async () => {
    const { w, id } = await worldWithTask();
    const file = join(cacheDir(w), cacheFiles(w, 'call')[0]!);
    const elsewhere = join(w.home, 'cache.bin');
    renameSync(file, elsewhere);
    symlinkSync(elsewhere, file);
    expect(await getWithCache(w, id)).toBe('absent');
    expect(lstatSync(file).isFile()).toBe(true);
    rmSync(file);
    execFileSync('mkfifo', [file]);
    expect(await getWithCache(w, id)).toBe('absent');
    expect(lstatSync(file).isFile()).toBe(true);
    expect(await getWithCache(w, id)).toBe('used');
  });

  it('makes no state folder of its own: a hello before any task leaves none', async () => {
    const w = world();
    const res = await runAgent(w, ['call', encodeRequest(helloRequest())]);
    expect(JSON.parse(res.stdout)).toMatchObject({ ok: true });
    expect(existsSync(w.stateDir)).toBe(false);
  });
});
