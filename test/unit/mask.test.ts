// Host-side masking (host/mcp/mask.ts): known secret values replaced, per sandbox, learned once.
import { describe, expect, it } from 'vitest';
import { SecretMasker } from '../../host/mcp/mask.js';

describe('SecretMasker', () => {
  it('masks every occurrence, longest value first, and ignores values under 4 bytes', () => {
    const m = new SecretMasker(['abc', 'secret-1', 'secret-1-long']);
    expect(m.mask('local:a', 'x secret-1-long y secret-1 z abc')).toBe('x [MASKED] y [MASKED] z abc');
    m.add('local:a', ['zzzz', 'secret-1-longer']);
    expect(m.mask('local:a', 'zzzzz secret-1-longer')).toBe('[MASKED]z [MASKED]');
  });

  it("masks a sandbox's own values only in that sandbox's output", () => {
    const m = new SecretMasker(['server-secret']);
    m.add('local:a', ['a-secret-value']);
    expect(m.mask('local:a', 'a-secret-value server-secret')).toBe('[MASKED] [MASKED]');
    expect(m.mask('local:b', 'a-secret-value server-secret')).toBe('a-secret-value [MASKED]');
    m.forget('local:a');
    expect(m.mask('local:a', 'a-secret-value')).toBe('a-secret-value');
  });

  it("learns a sandbox's secret-named variables once, retrying a failed read", async () => {
    const m = new SecretMasker();
    let reads = 0;
    const failing = async (): Promise<Record<string, string>> => {
      reads++;
      throw new Error('unreachable');
    };
    await expect(m.learn('local:a', failing)).rejects.toThrow('unreachable');
    const read = async () => (reads++, { API_KEY: 'key-value-1234', PLAIN: 'plain-value-1234' });
    await Promise.all([m.learn('local:a', read), m.learn('local:a', read)]);
    await m.learn('local:a', read);
    expect(reads).toBe(2);
    expect(m.mask('local:a', 'key-value-1234 plain-value-1234')).toBe('[MASKED] plain-value-1234');
  });
});
