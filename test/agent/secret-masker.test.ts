// The streaming masker in-process: however a stream is split into reads, the output equals
// masking the whole stream at once; the log cap counts masked bytes.
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CappedLog } from '../../agent/capped-log.js';
import { SecretMasker, secretValuesFromEnv } from '../../agent/secret-masker.js';

const M = '[MASKED]';

/** Masks `input` fed in the given chunk sizes (cycled). */
function maskChunked(secrets: string[], input: Buffer, sizes: number[]): string {
  const out: Buffer[] = [];
  const masker = new SecretMasker(secrets, (b) => out.push(Buffer.from(b)));
  let pos = 0;
  for (let i = 0; pos < input.length; i++) {
    const n = sizes[i % sizes.length]!;
    // Reuse one scratch buffer, as the supervisor does: the masker must copy what it keeps.
    const scratch = Buffer.from(input.subarray(pos, pos + n));
    masker.push(scratch);
    scratch.fill(0x3f);
    pos += n;
  }
  masker.flush();
  return Buffer.concat(out).toString();
}

/**
 * Reference: every occurrence of every secret (overlapping ones included) on the whole text;
 * occurrences that overlap merge into one span and one marker, adjacent ones stay separate.
 */
function maskWhole(secrets: string[], text: string): string {
  const usable = [...new Set(secrets)].filter((s) => Buffer.byteLength(s) >= 4);
  const spans: [number, number][] = [];
  for (const s of usable) for (let i = text.indexOf(s); i !== -1; i = text.indexOf(s, i + 1)) spans.push([i, i + s.length]);
  spans.sort((a, b) => a[0] - b[0]);
  let out = '';
  let pos = 0;
  let cur: [number, number] | null = null;
  const close = () => {
    if (cur) out += text.slice(pos, cur[0]) + M;
    if (cur) pos = cur[1];
  };
  for (const span of spans) {
    if (cur && span[0] < cur[1]) cur[1] = Math.max(cur[1], span[1]);
    else {
      close();
      cur = [...span];
    }
  }
  close();
  return out + text.slice(pos);
}

describe('SecretMasker', () => {
  it('masks a secret split across every possible single boundary and one byte at a time', () => {
    const secret = 'hunter2-secret';
    const text = `a ${secret} b ${secret}${secret} c`;
    for (let cut = 1; cut < text.length; cut++) expect(maskChunked([secret], Buffer.from(text), [cut, 1000])).toBe(`a ${M} b ${M}${M} c`);
    expect(maskChunked([secret], Buffer.from(text), [1])).toBe(`a ${M} b ${M}${M} c`);
  });

  it('matches whole-stream masking for random splits, overlapping and nested secrets', () => {
    const secrets = ['abcab', 'abcabd', 'bcabx', 'cabcabc', 'xyzw', 'zzzz', 'wabc'];
    let seed = 42;
    const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 1000; round++) {
      const text = Array.from({ length: 60 }, () => 'abcxyzw'[rand(7)]).join('') + 'abcab' + 'zzzzz';
      const sizes = Array.from({ length: 5 }, () => 1 + rand(9));
      expect(maskChunked(secrets, Buffer.from(text), sizes)).toBe(maskWhole(secrets, text));
    }
  });

  it('masks both of two overlapping secrets, leaving no part of either', () => {
    // Leftmost-only masking would print `SECRETVALUE9`, most of the second secret.
    const secrets = ['1234abcd', 'abcdSECRETVALUE9'];
    const text = 'x 1234abcdSECRETVALUE9 y';
    for (const sizes of [[1], [3], [5, 2], [1000]]) expect(maskChunked(secrets, Buffer.from(text), sizes)).toBe(`x ${M} y`);
    // A secret overlapping itself, and a chain of overlaps that outgrows every secret.
    expect(maskChunked(['abab'], Buffer.from('-ababab-abab-'), [1])).toBe(`-${M}-${M}-`);
    expect(maskChunked(['1234abcd', 'abcd5678', '5678wxyz'], Buffer.from('<1234abcd5678wxyz>'), [2])).toBe(`<${M}>`);
  });

  it('holds back at most one secret length, even inside an endless masked span', () => {
    const masker = new SecretMasker(['aaaa'], () => {});
    let maxPending = 0;
    for (let i = 0; i < 1000; i++) {
      masker.push(Buffer.alloc(997, 0x61));
      maxPending = Math.max(maxPending, masker.pendingBytes);
    }
    expect(maxPending).toBeLessThan(4);
    const out: Buffer[] = [];
    const m2 = new SecretMasker(['aaaa'], (b) => out.push(Buffer.from(b)));
    for (let i = 0; i < 50; i++) m2.push(Buffer.alloc(7, 0x61));
    m2.push(Buffer.from('b'));
    m2.flush();
    expect(Buffer.concat(out).toString()).toBe(`${M}b`);
  });

  it('lets a partial secret through at the end of the stream (it is not the secret)', () => {
    expect(maskChunked(['abcdef'], Buffer.from('xxabcde'), [3])).toBe('xxabcde');
  });

  it('does not mask values shorter than 4 bytes', () => {
    expect(maskChunked(['abc', 'abcd'], Buffer.from('abc abcd'), [2])).toBe(`abc ${M}`);
    expect(new SecretMasker(['abc'], () => {}).isPassThrough).toBe(true);
  });

  it('handles multibyte secrets split inside a character', () => {
    const secret = 'pässwörd€';
    expect(maskChunked([secret], Buffer.from(`<${secret}>`), [1])).toBe(`<${M}>`);
  });

  it('takes values only from variables whose names contain KEY, TOKEN, SECRET or PASSWORD', () => {
    const env = {
      API_KEY: 'k-1234',
      github_token: 't-1234',
      MySecretThing: 's-1234',
      DB_PASSWORD: 'p-1234',
      PATH: '/usr/bin',
      SHORT_KEY: 'abc',
      EMPTY_TOKEN: '',
    };
    expect(secretValuesFromEnv(env).sort()).toEqual(['k-1234', 'p-1234', 's-1234', 't-1234']);
  });
});

describe('CappedLog', () => {
  const withLog = (cap: number, secrets: string[], fn: (log: CappedLog) => void) => {
    const dir = mkdtempSync(join(tmpdir(), 'capped-log-'));
    try {
      const fd = openSync(join(dir, 'x.log'), 'w');
      const log = new CappedLog(fd, cap, secrets);
      fn(log);
      log.end();
      closeSync(fd);
      return { text: readFileSync(join(dir, 'x.log'), 'utf8'), size: log.size, truncated: log.isTruncated };
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('caps what is written after masking, and flags the loss', () => {
    // The 6-byte secret becomes an 8-byte marker: the cap counts the marker.
    const res = withLog(10, ['s3cr3t'], (log) => log.push(Buffer.from('ab s3cr3t cd')));
    expect(res).toEqual({ text: `ab ${M}`.slice(0, 10), size: 10, truncated: true });
  });

  it('does not flag truncation when the output fits exactly', () => {
    expect(withLog(4, [], (log) => log.push(Buffer.from('abcd')))).toEqual({ text: 'abcd', size: 4, truncated: false });
  });

  it('counts a held-back partial secret that no longer fits as dropped', () => {
    const res = withLog(4, ['secret-value'], (log) => {
      log.push(Buffer.from('abcd'));
      log.push(Buffer.from('secr'));
    });
    expect(res).toEqual({ text: 'abcd', size: 4, truncated: true });
  });

  it('never writes a secret, even when only part of the marker fits', () => {
    const res = withLog(5, ['topsecret'], (log) => {
      for (const b of Buffer.from('xxtopsecretyy')) log.push(Buffer.of(b));
    });
    expect(res.text).toBe('xx[MA');
    expect(res.truncated).toBe(true);
  });
});
