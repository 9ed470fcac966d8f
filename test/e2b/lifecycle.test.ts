// The e2b lifecycle part (create, list, getInfo, setTimeout, kill) with the real SDK against the
// fake: which control-plane calls each makes, that none of them connects, and that SDK failures
// come out unmapped (the provider maps them).
import { SandboxError, SandboxNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createLifecycle, type Lifecycle } from '../../host/providers/e2b/lifecycle.js';
import { isProviderError } from '../../host/providers/provider-error.js';
import { SANDBOX_LIFETIME_DEFAULT_S } from '../../host/providers/provider.js';
import { callsSince, startSdkWorld, type SdkWorld } from '../support/e2b-sdk-world.js';

let world: SdkWorld;
let lifecycle: Lifecycle;

beforeAll(async () => {
  world = await startSdkWorld({ pageSize: 2 });
  lifecycle = createLifecycle(world.sdkOpts);
});
afterAll(async () => {
  await world?.close();
});

describe('e2b lifecycle', () => {
  test('create sends template, timeout and envs, returns a connected sandbox and its metadata', async () => {
    const mark = world.fake.calls.length;
    const { sandbox, metadata } = await lifecycle.create({ template: 'base', timeoutS: 90, envs: { GREETING: 'hi' } });
    expect(callsSince(world.fake, mark)).toEqual(['POST /v2/sandboxes', `GET /sandboxes/${sandbox.sandboxId}`]);
    expect(world.fake.calls[mark]!.body).toMatchObject({ templateID: 'base', timeout: 90, envVars: { GREETING: 'hi' } });
    expect(metadata).toMatchObject({ sandbox_id: sandbox.sandboxId, template: 'base', status: 'running' });
    // The returned Sandbox reaches envd with no further control-plane call.
    const mark2 = world.fake.calls.length;
    expect((await sandbox.commands.run('echo $GREETING')).stdout).toBe('hi\n');
    expect(callsSince(world.fake, mark2)).toEqual([]);
  });

  test("a create without a timeout asks for the contract's default lifetime, not E2B's API default", async () => {
    // What E2B would apply to a create that names no timeout (the fake follows the API spec: 15 s).
    const bare = await fetch(`${world.fake.apiUrl}/v2/sandboxes`, {
      method: 'POST',
      headers: { 'X-API-KEY': world.fake.apiKey, 'content-type': 'application/json' },
      body: JSON.stringify({ templateID: 'base' }),
    });
    const bareSandbox = world.fake.sandbox(((await bare.json()) as { sandboxID: string }).sandboxID)!;
    expect(Math.round((bareSandbox.endAt.getTime() - bareSandbox.startedAt.getTime()) / 1000)).toBe(15);
    // Gone now rather than at its deadline, 15 s on: expiring then, it would shift the windows of
    // the list test that follows if that one ran late.
    expect(await lifecycle.kill(bareSandbox.id)).toBe(true);

    const mark = world.fake.calls.length;
    const { metadata } = await lifecycle.create({});
    expect(world.fake.calls[mark]!.body).toMatchObject({ templateID: 'base', timeout: SANDBOX_LIFETIME_DEFAULT_S });
    const lifetimeS = (Date.parse(metadata.end_at!) - Date.parse(metadata.started_at!)) / 1000;
    expect(Math.round(lifetimeS)).toBe(SANDBOX_LIFETIME_DEFAULT_S);
  });

  test('a create whose metadata cannot be read kills the sandbox and throws the SDK error', async () => {
    const mark = world.fake.calls.length;
    world.fake.injectFailure({ path: /^\/sandboxes\/[^/]+$/, method: 'GET', status: 500, times: 1 });
    const err: unknown = await lifecycle.create({ timeoutS: 60 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(SandboxError);
    expect(isProviderError(err)).toBe(false);
    const made = callsSince(world.fake, mark);
    expect(made).toHaveLength(3);
    expect(made[2]).toMatch(/^DELETE \/sandboxes\//);
    expect(world.fake.sandbox(made[2]!.replace('DELETE /sandboxes/', ''))).toBeUndefined();
  });

  test('options E2B does not have fail with unsupported before any call', async () => {
    const mark = world.fake.calls.length;
    for (const o of [{ cpu: 2 }, { memoryMb: 512 }, { region: 'eu' }]) {
      await expect(lifecycle.create(o)).rejects.toMatchObject({ category: 'unsupported', code: 'UnsupportedOption' });
    }
    await expect(lifecycle.list({ region: 'eu', limit: 1, offset: 0 })).rejects.toMatchObject({ category: 'unsupported' });
    await expect(lifecycle.list({ status: 'stopped', limit: 1, offset: 0 })).rejects.toMatchObject({ category: 'invalid_argument' });
    expect(callsSince(world.fake, mark)).toEqual([]);
  });

  test('list walks pages and keeps only the window; a status filter goes into the query', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await world.newSandbox(60)).sandboxId);
    world.fake.sandbox(ids[0]!)!.state = 'paused';
    const all = await lifecycle.list({ limit: 100, offset: 0 });
    expect(all.map((m) => m.sandbox_id)).toEqual(expect.arrayContaining(ids));
    const window = await lifecycle.list({ limit: 2, offset: 1 });
    expect(window.map((m) => m.sandbox_id)).toEqual(all.slice(1, 3).map((m) => m.sandbox_id));

    const mark = world.fake.calls.length;
    const paused = await lifecycle.list({ status: 'paused', limit: 10, offset: 0 });
    expect(paused.map((m) => [m.sandbox_id, m.status])).toEqual([[ids[0], 'paused']]);
    expect(world.fake.calls.slice(mark).every((c) => c.path.includes('state=paused'))).toBe(true);
  });

  test('getInfo, setTimeout and kill are static calls: no connect, and kill of an unknown sandbox is false', async () => {
    const { sandboxId } = await world.newSandbox(60);
    const mark = world.fake.calls.length;
    expect((await lifecycle.getInfo(sandboxId)).sandbox_id).toBe(sandboxId);
    await lifecycle.setTimeout(sandboxId, 600);
    expect(world.fake.calls.at(-1)!.body).toEqual({ timeout: 600 });
    expect(await lifecycle.kill(sandboxId)).toBe(true);
    expect(await lifecycle.kill(sandboxId)).toBe(false);
    expect(callsSince(world.fake, mark)).toEqual([
      `GET /sandboxes/${sandboxId}`,
      `POST /sandboxes/${sandboxId}/timeout`,
      `DELETE /sandboxes/${sandboxId}`,
      `DELETE /sandboxes/${sandboxId}`,
    ]);
    await expect(lifecycle.getInfo(sandboxId)).rejects.toBeInstanceOf(SandboxNotFoundError);
  });
});
