// The SDK options the e2b provider builds from its configuration: the environment fills what is
// unset, empty values count as unset, and a missing API key fails each call (not the build).
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { sdkOptsFrom } from '../../host/providers/e2b/sdk-opts.js';

const saved = { key: process.env.E2B_API_KEY, domain: process.env.E2B_DOMAIN };

function restore(name: 'E2B_API_KEY' | 'E2B_DOMAIN', value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

beforeEach(() => {
  delete process.env.E2B_API_KEY;
  delete process.env.E2B_DOMAIN;
});
afterEach(() => {
  restore('E2B_API_KEY', saved.key);
  restore('E2B_DOMAIN', saved.domain);
});

describe('sdkOptsFrom', () => {
  test('without a key every call throws authentication/MissingApiKey, naming the variable', () => {
    const opts = sdkOptsFrom({ apiUrl: 'http://127.0.0.1:1' });
    for (let i = 0; i < 2; i++) {
      expect(() => opts()).toThrow(expect.objectContaining({ category: 'authentication', code: 'MissingApiKey' }));
    }
    expect(() => opts()).toThrow(/E2B_API_KEY/);
  });

  test('configuration wins over the environment; empty values and a zero timeout are left to the SDK', () => {
    process.env.E2B_API_KEY = 'from-env';
    process.env.E2B_DOMAIN = 'env.example';
    expect(sdkOptsFrom({})()).toEqual({ apiKey: 'from-env', domain: 'env.example', logger: {} });
    expect(sdkOptsFrom({ apiKey: 'k', domain: 'd.example', apiUrl: 'http://a', sandboxUrl: 'http://s', requestTimeoutMs: 5 })()).toEqual({
      apiKey: 'k',
      domain: 'd.example',
      apiUrl: 'http://a',
      sandboxUrl: 'http://s',
      requestTimeoutMs: 5,
      logger: {},
    });
    expect(sdkOptsFrom({ apiKey: 'k', domain: '', apiUrl: '', sandboxUrl: '', requestTimeoutMs: 0 })()).toEqual({
      apiKey: 'k',
      logger: {},
    });
  });
});
