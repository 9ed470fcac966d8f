// Set-up for the unit tests of the e2b provider's parts: the real `e2b` SDK against the in-repo
// fake of E2B, with the SDK options the provider would build, and sandboxes made by the SDK itself.
import { Sandbox } from 'e2b';
import { sdkOptsFrom, type SdkOpts } from '../../host/providers/e2b/sdk-opts.js';
import { startFakeE2b, type FakeE2b, type FakeE2bOpts } from '../e2b-fake/index.js';

/** A running fake, SDK options pointing at it, and a way to make sandboxes there. */
export interface SdkWorld {
  fake: FakeE2b;
  sdkOpts: () => SdkOpts;
  /** A new sandbox created by the SDK (a connected Sandbox, as Sandbox.create returns it). */
  newSandbox(timeoutS?: number): Promise<Sandbox>;
  close(): Promise<void>;
}

/** Starts a fake and returns the world around it; close() stops it and every sandbox in it. */
export async function startSdkWorld(fakeOpts: FakeE2bOpts = {}): Promise<SdkWorld> {
  const fake = await startFakeE2b(fakeOpts);
  const sdkOpts = sdkOptsFrom({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, sandboxUrl: fake.sandboxUrl });
  return {
    fake,
    sdkOpts,
    newSandbox: (timeoutS = 120) => Sandbox.create('base', { ...sdkOpts(), timeoutMs: timeoutS * 1000 }),
    close: () => fake.close(),
  };
}

/** The control-plane calls recorded since `mark` (an index into fake.calls), as `METHOD path`. */
export function callsSince(fake: FakeE2b, mark: number): string[] {
  return fake.calls.slice(mark).map((c) => `${c.method} ${c.path.replace(/\?.*$/, '')}`);
}
