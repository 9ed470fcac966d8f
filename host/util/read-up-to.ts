// Reading a file of untrusted size: never more than a bound, whatever the file claims or grows to.
import { readSync } from 'node:fs';

/** At most `maxBytes` of the open file `fd`, from its current offset, read until its end or the bound. */
export function readUpTo(fd: number, maxBytes: number): Buffer {
  const buf = Buffer.alloc(maxBytes);
  let length = 0;
  for (let n = 1; n > 0 && length < buf.length; length += n) n = readSync(fd, buf, length, buf.length - length, null);
  return buf.subarray(0, length);
}
