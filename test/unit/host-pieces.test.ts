// Small host pieces with exact expectations: capped capture, host-side masking, id parsing.
import { describe, expect, it } from 'vitest';
import { ProviderError } from '../../host/errors.js';
import { SecretMasker } from '../../host/mask.js';
import { OutputCapture } from '../../host/providers/output-capture.js';
import { parseSandboxRef } from '../../host/sandbox-ref.js';

describe('OutputCapture', () => {
  it('keeps everything under the cap', () => {
    const c = new OutputCapture(10);
    c.push(Buffer.from('abc'));
    c.push(Buffer.from('defg'));
    expect(c.data.toString()).toBe('abcdefg');
    expect(c.truncated).toBe(false);
    // Nothing was dropped: every kept byte is from the stream's start, tail half included.
    expect(c.splitAt).toBe(7);
  });

  it('keeps the first and last halves of a longer stream, across chunk boundaries', () => {
    const c = new OutputCapture(10);
    const text = 'ABCDE' + 'x'.repeat(1000) + 'VWXYZ';
    for (let i = 0; i < text.length; i += 7) c.push(Buffer.from(text.slice(i, i + 7)));
    expect(c.data.toString()).toBe('ABCDEVWXYZ');
    expect(c.splitAt).toBe(5);
    expect(c.truncated).toBe(true);
    expect(c.totalBytes).toBe(text.length);
  });

  it('handles one huge chunk', () => {
    const c = new OutputCapture(4);
    c.push(Buffer.from('0123456789'));
    expect(c.data.toString()).toBe('0189');
  });
});

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
