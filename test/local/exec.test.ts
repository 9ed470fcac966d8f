// Commands in local sandboxes (the provider's exec) against real bubblewrap: what one exec leaves
// running, timeouts and cancellation killing the whole process group, capped output, stdin, cwd.
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

describe('local sandbox exec', () => {
  it('a process started by one exec is visible and signalable from the next', async () => {
    const { sandbox_id: id } = await create();
    // Returns promptly although the daemon keeps running (its output goes nowhere).
    const start = await provider.exec(id, 'setsid sleep 4321 >/dev/null 2>&1 & echo $!', { timeoutS: 10 });
    const pid = start.stdout.toString().trim();
    expect(pid).toMatch(/^\d+$/);
    // $! is setsid's pid, which becomes sleep once setsid has exec'd: the next exec may see either.
    const cmdline = async () => (await provider.exec(id, `tr '\\0' ' ' < /proc/${pid}/cmdline`, { timeoutS: 10 })).stdout.toString();
    await waitFor(async () => (await cmdline()) === 'sleep 4321 ', 'the daemon (setsid exec-ing sleep) to show in the next exec');
    const killed = await provider.exec(
      id,
      `kill -TERM ${pid}; for i in $(seq 100); do [ -e /proc/${pid} ] || break; sleep 0.05; done; [ ! -e /proc/${pid} ]`,
      { timeoutS: 10 },
    );
    expect(killed.exitCode).toBe(0);
  });

  it('exec: timeout kills the process group, output is capped, stdin and cwd work', async () => {
    const { sandbox_id: id } = await create();
    // A child in the command's process group (a pipeline member, a background job) dies with it.
    const slow = await provider.exec(id, 'sleep 54321 & sleep 54322 | cat; echo never', { timeoutS: 1 });
    expect(slow).toMatchObject({ timedOut: true, exitCode: 137 });
    expect(slow.stdout.toString()).toBe('');
    const ps = await provider.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 10 });
    expect(ps.stdout.toString()).not.toMatch(/5432[12]/);

    const big = await provider.exec(id, 'head -c 300000 /dev/zero; head -c 5 /dev/zero >&2', { timeoutS: 10, maxOutputBytes: 1000 });
    // The result says where the kept head ends; an untruncated stream is all head.
    expect(big).toMatchObject({ exitCode: 0, stdoutTruncated: true, stderrTruncated: false, stdoutHeadBytes: 500, stderrHeadBytes: 5 });
    expect(big.stdout.length).toBe(1000);
    expect(big.stderr.length).toBe(5);
    // Commands keep the head and the tail of their output (the end is where errors are).
    const ends = await provider.exec(id, 'printf START; head -c 300000 /dev/zero; printf END', { timeoutS: 10, maxOutputBytes: 1000 });
    expect(ends).toMatchObject({ stdoutTruncated: true });
    expect([ends.stdout.length, ends.stdout.subarray(0, 5).toString(), ends.stdout.subarray(-3).toString()]).toEqual([
      1000,
      'START',
      'END',
    ]);

    const echo = await provider.exec(id, 'cat', { timeoutS: 10, stdin: Buffer.from([1, 2, 3, 0, 255]) });
    expect([...echo.stdout]).toEqual([1, 2, 3, 0, 255]);

    await provider.writeFile(id, '/tmp/work/x', Buffer.from('x'));
    const inDir = await provider.exec(id, 'pwd; ls', { timeoutS: 10, cwd: '/tmp/work' });
    expect(inDir.stdout.toString()).toBe('/tmp/work\nx\n');
    const rel = await provider.exec(id, 'pwd', { timeoutS: 10, cwd: '.' });
    expect(rel.stdout.toString()).toBe('/home/user\n');
    await expect(provider.exec(id, 'pwd', { timeoutS: 10, cwd: '/no/such/dir' })).rejects.toMatchObject({
      category: 'invalid_argument',
      code: 'cwd_not_found',
    });

    const signalled = await provider.exec(id, 'kill -TERM $$', { timeoutS: 10 });
    expect(signalled).toMatchObject({ exitCode: 143, timedOut: false });
  });

  it('exec: an aborted signal kills the process group and returns; an already-aborted one starts nothing', async () => {
    const { sandbox_id: id } = await create();
    const processes = async () => (await provider.exec(id, 'cat /proc/[0-9]*/cmdline | tr "\\0" " "', { timeoutS: 10 })).stdout.toString();
    const ac = new AbortController();
    // Sleeps far longer than the test may take: the abort, not their end, must stop them.
    const running = provider.exec(id, 'sleep 300 & sleep 301; wait', { timeoutS: 50, signal: ac.signal });
    await waitFor(async () => {
      const ps = await processes();
      return ps.includes('sleep 300 ') && ps.includes('sleep 301 ');
    }, 'both sleeps to run');
    ac.abort();
    // Killed like at a timeout (well before the 50 s one), but not reported as one.
    expect(await running).toMatchObject({ exitCode: 137, timedOut: false });
    const after = await processes();
    expect(after).not.toContain('sleep 300 ');
    expect(after).not.toContain('sleep 301 ');

    const aborted = new AbortController();
    aborted.abort();
    await expect(provider.exec(id, 'touch /tmp/ran', { timeoutS: 10, signal: aborted.signal })).rejects.toMatchObject({
      category: 'conflict',
      code: 'cancelled',
    });
    expect((await provider.exec(id, 'test -e /tmp/ran; echo $?', { timeoutS: 10 })).stdout.toString()).toBe('1\n');
    // A signal aborted after the command finished changes nothing.
    const late = new AbortController();
    const done = await provider.exec(id, 'echo done', { timeoutS: 10, signal: late.signal });
    late.abort();
    expect(done).toMatchObject({ exitCode: 0, timedOut: false });
  });
});
