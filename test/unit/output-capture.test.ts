// The capped capture of command output: first and last halves kept, with exact expectations.
import { describe, expect, it } from 'vitest';
import { OutputCapture } from '../../host/providers/output-capture.js';

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
