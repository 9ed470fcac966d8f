// The e2b provider's network: create's egress policy in E2B's own terms (what the SDK sends, as
// the fake records it and reads it back), what E2B cannot express, and exposed ports as the
// SDK's host for the port — with the real SDK against the in-repo fake.
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createE2bProvider } from '../../host/providers/e2b/e2b-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { callsSince, startSdkWorld, type SdkWorld } from './sdk-world.js';

let world: SdkWorld;
let provider: Provider;

beforeAll(async () => {
  world = await startSdkWorld();
  provider = createE2bProvider({ apiKey: world.fake.apiKey, apiUrl: world.fake.apiUrl, sandboxUrl: world.fake.sandboxUrl });
});
afterAll(async () => {
  await provider?.close();
  await world?.close();
});

describe('e2b network', () => {
  test('a create without network sends no egress settings: E2B keeps its default', async () => {
    const mark = world.fake.calls.length;
    const meta = await provider.create({ timeoutS: 60 });
    const body = world.fake.calls[mark]!.body as Record<string, unknown>;
    expect(body.allow_internet_access).toBeUndefined();
    expect(body.network).toBeUndefined();
    expect(world.fake.sandbox(meta.sandbox_id)).toMatchObject({ allowInternetAccess: null, network: null });
  });

  test('network "none" denies all internet access', async () => {
    const mark = world.fake.calls.length;
    const meta = await provider.create({ timeoutS: 60, network: { allowOut: [] } });
    expect(world.fake.calls[mark]!.body).toMatchObject({ allow_internet_access: false });
    const info = await Sandbox.getInfo(meta.sandbox_id, world.sdkOpts());
    expect(info.allowInternetAccess).toBe(false);
  });

  test('an allow-list becomes allowOut with everything else denied', async () => {
    const mark = world.fake.calls.length;
    const meta = await provider.create({ timeoutS: 60, network: { allowOut: ['pypi.org', '*.githubusercontent.com', '151.101.0.223'] } });
    expect(world.fake.calls[mark]!.body).toMatchObject({
      network: { allowOut: ['pypi.org', '*.githubusercontent.com', '151.101.0.223'], denyOut: ['0.0.0.0/0'] },
    });
    const info = await Sandbox.getInfo(meta.sandbox_id, world.sdkOpts());
    expect(info.network).toMatchObject({ allowOut: ['pypi.org', '*.githubusercontent.com', '151.101.0.223'], denyOut: ['0.0.0.0/0'] });
  });

  test('an entry with a port is unsupported, before any call', async () => {
    const mark = world.fake.calls.length;
    await expect(provider.create({ timeoutS: 60, network: { allowOut: ['pypi.org', 'example.com:8443'] } })).rejects.toMatchObject({
      category: 'unsupported',
      code: 'UnsupportedOption',
      message: expect.stringContaining(':port'),
    });
    expect(callsSince(world.fake, mark)).toEqual([]);
  });

  test('describeNetwork reads the effective egress back from E2B', async () => {
    const none = await provider.create({ timeoutS: 60, network: { allowOut: [] } });
    const listed = await provider.create({ timeoutS: 60, network: { allowOut: ['pypi.org'] } });
    const open = await provider.create({ timeoutS: 60 });
    expect(await provider.describeNetwork(none.sandbox_id)).toEqual({ egress: 'none', allow_out: [], proxy: null, exposed_ports: [] });
    expect(await provider.describeNetwork(listed.sandbox_id)).toMatchObject({ egress: 'allow_out', allow_out: ['pypi.org'] });
    expect(await provider.describeNetwork(open.sandbox_id)).toMatchObject({ egress: 'provider_default', allow_out: [] });
  });

  test("expose_port is the SDK's HTTPS host for the port, the same on every call", async () => {
    const { sandbox_id: id } = await provider.create({ timeoutS: 60 });
    const first = await provider.exposePort(id, 3000);
    expect(first).toEqual({ url: `https://3000-${id}.e2b.app/` });
    expect(await provider.exposePort(id, 3000)).toEqual(first);
    // What the SDK itself answers for a sandbox it connected to.
    const sandbox = await Sandbox.connect(id, { ...world.sdkOpts(), timeoutMs: 30_000 });
    expect(first.url).toBe(`https://${sandbox.getHost(3000)}/`);
  });

  test('expose_port refuses a port outside 1-65535 before any call, and a gone sandbox is not_found', async () => {
    const mark = world.fake.calls.length;
    await expect(provider.exposePort('whatever', 0)).rejects.toMatchObject({ category: 'invalid_argument' });
    await expect(provider.exposePort('whatever', 65536)).rejects.toMatchObject({ category: 'invalid_argument' });
    expect(callsSince(world.fake, mark)).toEqual([]);
    await expect(provider.exposePort('fake0000000000000000', 3000)).rejects.toMatchObject({ category: 'not_found' });
  });
});
