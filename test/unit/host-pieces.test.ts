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
    expect(m.mask('x secret-1-long y secret-1 z abc')).toBe('x [MASKED] y [MASKED] z abc');
    m.add(['zzzz']);
    expect(m.mask('zzzzz')).toBe('[MASKED]z');
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
