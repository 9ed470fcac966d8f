// The data of an `input` request sent with `data_on_stdin` (minor 3): the agent process's own
// stdin, read to its end. The host sends input this way so that it is never on a command line,
// where `ps` on the host and /proc inside the sandbox show it to every user while the call runs.
import { isUtf8 } from 'node:buffer';
import { readSync } from 'node:fs';
import { LIMITS } from '../shared/limits.js';
import { AgentFailure } from './errors.js';
import { sleep } from './timing.js';

const TOO_LONG = `field \`data\` is too long (maximum ${LIMITS.inputMaxBytes} bytes of UTF-8)`;

/**
 * Reads `fd` to end-of-file: at most LIMITS.inputMaxBytes of UTF-8 text, else `invalid_request`
 * with the same messages an inline `data` gets (never echoing the data).
 */
export async function readInputData(fd = 0): Promise<Buffer> {
  // One byte more than allowed tells "too long" from "exactly the maximum".
  const buf = Buffer.alloc(LIMITS.inputMaxBytes + 1);
  let length = 0;
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf, length, buf.length - length, null);
    } catch (err) {
      // A pipe left non-blocking by the caller has nothing yet: wait briefly, as writeLine does.
      if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') throw err;
      await sleep(1);
      continue;
    }
    if (n === 0) break;
    length += n;
    if (length > LIMITS.inputMaxBytes) throw new AgentFailure('invalid_request', TOO_LONG);
  }
  const data = buf.subarray(0, length);
  if (!isUtf8(data)) throw new AgentFailure('invalid_request', 'field `data` must be UTF-8 text');
  return data;
}
