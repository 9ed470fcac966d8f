// The browser's task follower (host/util/follow-task.ts) against a scripted source that pages two
// byte streams as the agent does (offset, limit, decoded as UTF-8): every byte shown once and in
// order, a character split at a page end held back until it is whole, long polls only once
// everything is shown, and the end only once the task ended and both streams were read.
import { describe, expect, it } from 'vitest';
import type { TaskView } from '../../shared/protocol.js';
import { cutNote, followTask, type PageAsk } from '../../host/util/follow-task.js';

const TASK = '0123456789abcdef0123456789abcdef';

/** A task whose streams hold `stdout`/`stderr` (bytes), read `limit` bytes at a time; `state` is its state now. */
function source(limit: number) {
  const streams = { stdout: Buffer.alloc(0), stderr: Buffer.alloc(0) };
  let state: TaskView['state'] = 'running';
  /** A capped stream's kept end: sent, as the agent does, once the task ended and a page reaches the end of its log. */
  const tails: Partial<Record<'stdout' | 'stderr', string>> = {};
  const asks: PageAsk[] = [];
  const page = (s: 'stdout' | 'stderr', offset: number) => streams[s].subarray(offset, offset + limit);
  return {
    streams,
    tails,
    asks,
    setState: (next: TaskView['state']) => (state = next),
    async read(ask: PageAsk): Promise<TaskView> {
      asks.push(ask);
      const out = page('stdout', ask.stdout_offset);
      const err = page('stderr', ask.stderr_offset);
      const tailOf = (s: 'stdout' | 'stderr', next: number) =>
        tails[s] !== undefined && state !== 'running' && next >= streams[s].length ? { [`${s}_tail`]: tails[s] } : {};
      return {
        ...tailOf('stdout', ask.stdout_offset + out.length),
        ...tailOf('stderr', ask.stderr_offset + err.length),
        task_id: TASK,
        state,
        exit_code: state === 'running' ? null : 0,
        started_at: 1,
        finished_at: state === 'running' ? null : 2,
        stdout: out.toString('utf8'),
        stderr: err.toString('utf8'),
        stdout_next_offset: ask.stdout_offset + out.length,
        stderr_next_offset: ask.stderr_offset + err.length,
        stdout_size: streams.stdout.length,
        stderr_size: streams.stderr.length,
        stdout_truncated: tails.stdout !== undefined,
        stderr_truncated: tails.stderr !== undefined,
      };
    },
  };
}

describe('followTask', () => {
  it('shows every byte once, holds a split character back until it is whole, and long-polls only when caught up', async () => {
    const src = source(3);
    // "aé" is 3 bytes, one page; the next page of 3 bytes, "bc" and half of é, ends inside it.
    src.streams.stdout = Buffer.from('aébcé');
    src.streams.stderr = Buffer.from('warn');
    const shown = { stdout: '', stderr: '' };
    const views: TaskView[] = [];
    let reads = 0;
    const last = await followTask({
      read: async (ask) => {
        reads++;
        // The task ends once the follower first waits (everything shown so far).
        if (ask.wait > 0) {
          src.streams.stdout = Buffer.concat([src.streams.stdout, Buffer.from('!')]);
          src.setState('succeeded');
        }
        return src.read(ask);
      },
      append: (s, text) => (shown[s] += text),
      appendTail: () => expect.unreachable('no stream was capped'),
      onView: (v) => views.push(v),
      waitS: 25,
      isStopped: () => false,
    });
    expect(shown).toEqual({ stdout: 'aébcé!', stderr: 'warn' });
    expect(last?.state).toBe('succeeded');
    // Pages never decode the split é as U+FFFD.
    expect(shown.stdout).not.toContain('\uFFFD');
    // Reads at once while bytes remain; a wait only once both streams were caught up.
    const waits = src.asks.filter((a) => a.wait > 0);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toEqual({ stdout_offset: Buffer.byteLength('aébcé'), stderr_offset: 4, wait: 25 });
    expect(reads).toBe(src.asks.length);
    expect(views.at(-1)?.state).toBe('succeeded');
  });

  it('waits from the end while only part of a character is there, instead of asking for it again and again', async () => {
    const src = source(64);
    src.streams.stdout = Buffer.concat([Buffer.from('x'), Buffer.from('é').subarray(0, 1)]);
    const shown = { stdout: '', stderr: '' };
    let waited = 0;
    const last = await followTask({
      read: async (ask) => {
        if (ask.wait > 0) {
          waited++;
          expect(ask.stdout_offset).toBe(2); // from the end: its answer is only a wake-up
          src.streams.stdout = Buffer.concat([Buffer.from('x'), Buffer.from('é')]);
          src.setState('succeeded');
        }
        return src.read(ask);
      },
      append: (s, text) => (shown[s] += text),
      appendTail: () => expect.unreachable('no stream was capped'),
      onView: () => undefined,
      waitS: 25,
      isStopped: () => false,
    });
    expect(waited).toBe(1);
    expect(shown.stdout).toBe('xé');
    expect(last?.state).toBe('succeeded');
  });

  it("shows a capped stream's tail once, after all of its log, though every later page carries it again", async () => {
    const src = source(4);
    src.streams.stdout = Buffer.from('head');
    src.streams.stderr = Buffer.from('0123456789ab');
    src.tails.stdout = 'THE-END\n';
    src.setState('succeeded');
    const shown: string[] = [];
    await followTask({
      read: (ask) => src.read(ask),
      append: (s, text) => void shown.push(`${s}:${text}`),
      appendTail: (s, tail) => void shown.push(`${s} tail:${tail}`),
      onView: () => undefined,
      waitS: 25,
      isStopped: () => false,
    });
    // Three reads (stderr needs them), each reaching stdout's end: one tail, right after the log.
    expect(src.asks).toHaveLength(3);
    expect(shown).toEqual(['stdout:head', 'stdout tail:THE-END\n', 'stderr:0123', 'stderr:4567', 'stderr:89ab']);
  });

  it('stops when told to, without another read', async () => {
    const src = source(64);
    src.streams.stdout = Buffer.from('hello');
    let isStopped = false;
    const last = await followTask({
      read: async (ask) => {
        isStopped = true;
        return src.read(ask);
      },
      append: () => undefined,
      appendTail: () => undefined,
      onView: () => undefined,
      waitS: 25,
      isStopped: () => isStopped,
    });
    expect(last).toBeNull();
    expect(src.asks).toHaveLength(1);
  });
});

describe('cutNote', () => {
  const capped = (state: TaskView['state'], nextOffset: number): TaskView => ({
    task_id: TASK,
    state,
    exit_code: null,
    started_at: 1,
    finished_at: null,
    stdout: '',
    stderr: '',
    stdout_next_offset: nextOffset,
    stderr_next_offset: 0,
    stdout_size: 1024 * 1024,
    stderr_size: 0,
    stdout_truncated: true,
    stderr_truncated: false,
  });

  it('says where a capped stream was cut and whether its end is shown, and nothing of a stream that fits', () => {
    expect(cutNote(capped('succeeded', 1024 * 1024), 'stderr', false)).toBe('');
    expect(cutNote(capped('succeeded', 1024 * 1024), 'stdout', true)).toBe(
      " — cut at the 1 MiB cap; the stream's last 32 KiB are shown after the gap",
    );
    expect(cutNote(capped('running', 1024 * 1024), 'stdout', false)).toContain('shown once the task has ended');
    expect(cutNote(capped('succeeded', 65536), 'stdout', false)).toContain('come with the page that reaches the end of the log');
    // Ended, the log read to its end, and no tail came: the supervisor could not keep one.
    expect(cutNote(capped('succeeded', 1024 * 1024), 'stdout', false)).toBe(' — cut at the 1 MiB cap: the rest was not kept');
  });
});
