// Sandbox ids as tools receive them: qualified with a provider, or of the default one.
import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../host/providers/provider-error.js';
import { parseSandboxRef } from '../../host/providers/sandbox-ref.js';

describe('parseSandboxRef', () => {
  it('qualifies unqualified ids with the default provider', () => {
    expect(parseSandboxRef('abc123', 'local')).toEqual({ provider: 'local', id: 'abc123', qualified: 'local:abc123' });
    expect(parseSandboxRef('e2b:ixyz', 'local')).toEqual({ provider: 'e2b', id: 'ixyz', qualified: 'e2b:ixyz' });
  });

  it('rejects unknown providers and malformed ids naming the field, not the value', () => {
    for (const bad of ['nope:abc', 'local:', 'local:a b', '../etc']) {
      let error: unknown;
      try {
        parseSandboxRef(bad, 'local');
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(ProviderError);
      expect((error as ProviderError).category).toBe('invalid_argument');
      expect((error as ProviderError).message).toContain('`sandbox_id`');
      expect((error as ProviderError).message).not.toContain(bad);
    }
  });
});
