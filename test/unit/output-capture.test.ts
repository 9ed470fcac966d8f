// The capped captures of command output: the first bytes, or the first and last halves, with exact
// expectations.
import { describe, expect, it } from 'vitest';
import { HeadCapture, OutputCapture } from '../../host/providers/output-capture.js';

describe('OutputCapture', () => {
  it('keeps everything under the cap', () => {
    const c = new OutputCapture(10);
    c.push(Buffer.from('abc'));
    c.push(Buffer.from('defg'));
    expect(c.data.toString()).toBe('abcdefg');
    expect(c.isTruncated).toBe(false);
    // Nothing was dropped: every kept byte is from the stream's start, tail half included.
    expect(c.splitAt).toBe(7);
  });

  it('keeps the first and last halves of a longer stream, across chunk boundaries', () => {
    const c = new OutputCapture(10);
    const text = 'ABCDE' + 'x'.repeat(1000) + 'VWXYZ';
    for (let i = 0; i < text.length; i += 7) c.push(Buffer.from(text.slice(i, i + 7)));
    expect(c.data.toString()).toBe('ABCDEVWXYZ');
    expect(c.splitAt).toBe(5);
    expect(c.isTruncated).toBe(true);
    expect(c.totalBytes).toBe(text.length);
  });

  it('handles one huge chunk', () => {
    const c = new OutputCapture(4);
    c.push(Buffer.from('0123456789'));
    expect(c.data.toString()).toBe('0189');
  });
});

describe('HeadCapture', () => {
  it('keeps a stream that fits whole, and one exactly at the cap untruncated', () => {
    const c = new HeadCapture(6);
    c.push(Buffer.from('abc'));
    c.push(Buffer.from('def'));
    c.push(Buffer.alloc(0));
    expect(c.data.toString()).toBe('abcdef');
    expect(c.isTruncated).toBe(false);
    expect(c.splitAt).toBe(6);
  });

  it('keeps the first bytes of a longer stream, across chunk boundaries, and says it dropped the rest', () => {
    const c = new HeadCapture(5);
    c.push(Buffer.from('abc'));
    c.push(Buffer.from('defg'));
    expect(c.isTruncated).toBe(true);
    c.push(Buffer.from('hij'));
    expect(c.data.toString()).toBe('abcde');
    expect(c.splitAt).toBe(5);
  });

  it('marks a chunk arriving at a full cap as dropped', () => {
    const c = new HeadCapture(3);
    c.push(Buffer.from('abc'));
    expect(c.isTruncated).toBe(false);
    c.push(Buffer.from('d'));
    expect(c.isTruncated).toBe(true);
    expect(c.data.toString()).toBe('abc');
  });
});
