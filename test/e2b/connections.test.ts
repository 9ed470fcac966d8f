// The e2b connection cache and the connect that never lengthens a lifetime, with the real SDK
// against the fake; what is asserted is the control-plane calls the fake recorded.
import { SandboxNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { connectWithoutExtension, createConnections } from '../../host/providers/e2b/connections.js';
import { sdkOptsFrom } from '../../host/providers/e2b/sdk-opts.js';
import { callsSince, startSdkWorld, type SdkWorld } from '../support/e2b-sdk-world.js';

let world: SdkWorld;

beforeAll(async () => {
  world = await startSdkWorld();
});
afterAll(async () => {
  await world?.close();
});

describe('connectWithoutExtension', () => {
  test('asks a running sandbox for its remaining lifetime less the margin: no extension, end_at unchanged', async () => {
    const { sandboxId } = await world.newSandbox(120);
    const endAt = world.fake.sandbox(sandboxId)!.endAt.getTime();
    const mark = world.fake.calls.length;
    const sb = await connectWithoutExtension(sandboxId, world.sdkOpts(), 10_000);
    expect(callsSince(world.fake, mark)).toEqual([`GET /sandboxes/${sandboxId}`, `POST /v2/sandboxes/${sandboxId}/connect`]);
    const connect = world.fake.calls.at(-1)!;
    expect(connect.extendedLifetime).toBe(false);
    // At most the 120 s lifetime less the 10 s margin.
    expect((connect.body as { timeout: number }).timeout).toBeLessThanOrEqual(110);
    expect(world.fake.sandbox(sandboxId)!.endAt.getTime()).toBe(endAt);
    // The connection reaches envd.
    expect((await sb.commands.run('echo reached')).stdout).toBe('reached\n');
  });

  test('a margin larger than the lifetime left asks for nothing (0), still no extension', async () => {
    // Long enough to outlive a loaded machine's create and connect, far below the 60 s margin.
    const { sandboxId } = await world.newSandbox(30);
    const mark = world.fake.calls.length;
    await connectWithoutExtension(sandboxId, world.sdkOpts(), 60_000);
    const connect = world.fake.calls.slice(mark).find((c) => c.path.endsWith('/connect'))!;
    expect(connect).toMatchObject({ body: { timeout: 0 }, extendedLifetime: false });
  });

  test('a paused sandbox is resumed by the SDK connect with the platform default (no timeout sent)', async () => {
    const { sandboxId } = await world.newSandbox(120);
    world.fake.sandbox(sandboxId)!.state = 'paused';
    const mark = world.fake.calls.length;
    await connectWithoutExtension(sandboxId, world.sdkOpts(), 2000);
    const connect = world.fake.calls.slice(mark).find((c) => c.path.endsWith('/connect'))!;
    expect(connect.status).toBe(201);
    expect((connect.body as { timeout?: number }).timeout).toBeUndefined();
    expect(world.fake.sandbox(sandboxId)!.state).toBe('running');
  });

  test('an unknown sandbox fails with the SDK error, unmapped, and no connect', async () => {
    const mark = world.fake.calls.length;
    await expect(connectWithoutExtension('nosuchsandbox', world.sdkOpts(), 2000)).rejects.toBeInstanceOf(SandboxNotFoundError);
    expect(callsSince(world.fake, mark)).toEqual(['GET /sandboxes/nosuchsandbox']);
  });
});

describe('createConnections', () => {
  test('the least recently used connection is evicted; an evicted sandbox reconnects without extension', async () => {
    const connections = createConnections(world.sdkOpts, { maxConnections: 2 });
    const [a, b, c] = [await world.newSandbox(), await world.newSandbox(), await world.newSandbox()];
    connections.remember(a);
    connections.remember(b);
    const mark = world.fake.calls.length;
    // Using a makes b the least recently used; remembering c evicts b.
    expect(await connections.get(a.sandboxId)).toBe(a);
    connections.remember(c);
    expect(await connections.get(a.sandboxId)).toBe(a);
    expect(await connections.get(c.sandboxId)).toBe(c);
    expect(callsSince(world.fake, mark)).toEqual([]);

    const again = await connections.get(b.sandboxId);
    expect(again).not.toBe(b);
    expect(again.sandboxId).toBe(b.sandboxId);
    expect(callsSince(world.fake, mark)).toEqual([`GET /sandboxes/${b.sandboxId}`, `POST /v2/sandboxes/${b.sandboxId}/connect`]);
    expect(world.fake.calls.at(-1)!.extendedLifetime).toBe(false);
    // b's reconnect evicted a (c was used after a): a reconnects too, once.
    const mark2 = world.fake.calls.length;
    await connections.get(a.sandboxId);
    await connections.get(a.sandboxId);
    expect(callsSince(world.fake, mark2)).toEqual([`GET /sandboxes/${a.sandboxId}`, `POST /v2/sandboxes/${a.sandboxId}/connect`]);
  });

  test('concurrent gets share one connect; forget and clear make the next get connect again', async () => {
    const connections = createConnections(world.sdkOpts);
    const { sandboxId } = await world.newSandbox();
    const connectsTo = (mark: number) => world.fake.calls.slice(mark).filter((c) => c.path === `/v2/sandboxes/${sandboxId}/connect`).length;
    let mark = world.fake.calls.length;
    const [x, y] = await Promise.all([connections.get(sandboxId), connections.get(sandboxId)]);
    expect(x).toBe(y);
    expect(connectsTo(mark)).toBe(1);

    connections.forget(sandboxId);
    mark = world.fake.calls.length;
    expect(await connections.get(sandboxId)).not.toBe(x);
    expect(connectsTo(mark)).toBe(1);

    connections.clear();
    mark = world.fake.calls.length;
    await connections.get(sandboxId);
    expect(connectsTo(mark)).toBe(1);
  });

  test('a failed connect is not kept: the next get tries again', async () => {
    const connections = createConnections(world.sdkOpts);
    const { sandboxId } = await world.newSandbox();
    world.fake.injectFailure({ path: `/v2/sandboxes/${sandboxId}/connect`, status: 503, times: 1 });
    await expect(connections.get(sandboxId)).rejects.toThrow();
    const mark = world.fake.calls.length;
    expect((await connections.get(sandboxId)).sandboxId).toBe(sandboxId);
    expect(callsSince(world.fake, mark)).toEqual([`GET /sandboxes/${sandboxId}`, `POST /v2/sandboxes/${sandboxId}/connect`]);
  });

  test('without an API key a get fails with authentication and calls nothing', async () => {
    const saved = process.env.E2B_API_KEY;
    delete process.env.E2B_API_KEY;
    try {
      const connections = createConnections(sdkOptsFrom({ apiUrl: world.fake.apiUrl, sandboxUrl: world.fake.sandboxUrl }));
      const mark = world.fake.calls.length;
      await expect(connections.get('anything')).rejects.toMatchObject({ category: 'authentication', code: 'MissingApiKey' });
      expect(callsSince(world.fake, mark)).toEqual([]);
    } finally {
      if (saved !== undefined) process.env.E2B_API_KEY = saved;
    }
  });
});
