// Files in local sandboxes (the provider's file operations) against real bubblewrap: special
// files refused, megabytes both ways, capped listings.
import { beforeAll, describe, expect, it } from 'vitest';
import type { Provider } from '../../host/providers/provider.js';
import { localSandboxes } from '../support/local-sandboxes.js';
import { waitFor } from '../support/wait.js';

const local = localSandboxes();
const { create } = local;
let provider: Provider;
beforeAll(() => {
  provider = local.provider;
});

describe('local sandbox files', () => {
  it('files: FIFOs, sockets and devices are refused promptly, never written into or read from', async () => {
    const { sandbox_id: id } = await create();
    // No reader: opening it for writing would block until the file operation's own 120 s timeout.
    await provider.exec(id, 'mkfifo /tmp/lonely', { timeoutS: 10 });
    await expect(provider.writeFile(id, '/tmp/lonely', Buffer.from('x'))).rejects.toMatchObject({
      category: 'invalid_argument',
      code: 'ENOTREG',
    });
    await expect(provider.readFile(id, '/tmp/lonely')).rejects.toMatchObject({ category: 'invalid_argument', code: 'ENOTREG' });
    // A reader waits on the FIFO: a write into it would land in /tmp/got.
    await provider.exec(id, 'mkfifo /home/user/pipe && { cat /home/user/pipe > /tmp/got 2>/dev/null & echo $! > /tmp/reader; }', {
      timeoutS: 10,
    });
    await provider.exec(id, "node -e \"require('net').createServer().listen('/tmp/sock')\" >/dev/null 2>&1 &", { timeoutS: 10 });
    await waitFor(async () => (await provider.exec(id, 'test -S /tmp/sock', { timeoutS: 10 })).exitCode === 0, 'the socket to listen');
    const refused = { category: 'invalid_argument', code: 'ENOTREG' };
    for (const path of ['pipe', '/home/user/pipe', '/tmp/sock', '/dev/null']) {
      const err = await provider.writeFile(id, path, Buffer.from('leak')).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toMatchObject(refused);
      expect(JSON.stringify(err)).not.toMatch(/pipe|sock|dev/);
    }
    await expect(provider.writeFile(id, 'pipe', Buffer.from('leak'), { append: true })).rejects.toMatchObject(refused);
    for (const path of ['pipe', '/tmp/sock', '/dev/zero']) await expect(provider.readFile(id, path)).rejects.toMatchObject(refused);
    // A symlink to the FIFO is the FIFO.
    await provider.exec(id, 'ln -s /home/user/pipe /tmp/link', { timeoutS: 10 });
    await expect(provider.writeFile(id, '/tmp/link', Buffer.from('leak'))).rejects.toMatchObject(refused);
    // Nothing reached the reader: end it with an empty write of our own and look.
    const got = await provider.exec(
      id,
      ': > /home/user/pipe; r=$(cat /tmp/reader); while [ -e /proc/$r ]; do sleep 0.02; done; wc -c < /tmp/got; test -p /home/user/pipe && echo fifo',
      { timeoutS: 10 },
    );
    expect(got.stdout.toString()).toBe('0\nfifo\n');
    // Regular files still work, write-only ones included.
    expect(await provider.writeFile(id, 'plain', Buffer.from('abc'))).toEqual({ size: 3 });
    expect(await provider.writeFile(id, 'plain', Buffer.from('de'), { append: true })).toEqual({ size: 5 });
    await provider.exec(id, 'chmod 200 plain', { timeoutS: 10 });
    expect(await provider.writeFile(id, 'plain', Buffer.from('xyz'))).toEqual({ size: 3 });
    expect(await provider.writeFile(id, 'plain', Buffer.from('!'), { append: true })).toEqual({ size: 4 });
    await provider.exec(id, 'chmod 600 plain', { timeoutS: 10 });
    expect((await provider.readFile(id, 'plain')).data.toString()).toBe('xyz!');
  });

  it('moves megabytes both ways and keeps shallow entries first when a listing is capped', async () => {
    const { sandbox_id: id } = await create();
    const big = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
    expect(await provider.writeFile(id, 'big.bin', big)).toEqual({ size: big.length });
    expect(await provider.writeFile(id, 'big.bin', big, { append: true })).toEqual({ size: 2 * big.length });
    const tail = await provider.readFile(id, 'big.bin', { offset: big.length, length: big.length });
    expect(tail.size).toBe(2 * big.length);
    expect(tail.data.equals(big)).toBe(true);
    // In a directory of its own: the home also holds the resident agent's install and state.
    await provider.exec(id, 'mkdir -p w/a/deep && for i in $(seq 50); do : > w/a/deep/f$i; done; : > w/z1; : > w/z2; mv big.bin w/', {
      timeoutS: 10,
    });
    const capped = await provider.listFiles(id, 'w', { depth: 3, maxEntries: 5 });
    expect(capped).toHaveLength(5);
    // All four top-level entries come before anything deeper.
    for (const name of ['a', 'big.bin', 'z1', 'z2']) expect(capped.map((e) => e.name)).toContain(name);
  });
});
