// The keeper's relay across a resident's quiet period, over a real Unix socket (the resident
// itself is a line sink here: what matters is which frames reach which resident, and when). Once
// nothing is in flight for the quiet period the relay suspends; a frame a connected server sends
// from then on is held and reaches the next resident once it greets, in order and once; a new
// connection asks for a resident and is greeted by it; a request in flight keeps the relay from
// suspending; a resident of another build ends the connections the old one greeted. The quiet
// period runs on vitest's fake setTimeout (advanced by hand): the socket I/O is real.
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ResidentRelay } from '../../host/providers/local/keeper/resident-relay.js';

const GREETING = (pid: number, build = 'a') => `{"id":0,"hello":{"protocol":"1.5","pid":${pid},"build":"${build}"}}`;

interface Client {
  socket: Socket;
  lines: string[];
  isClosed: boolean;
}

const QUIET_MS = 1000;
const cleanups: (() => void)[] = [];
beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }));
afterEach(() => {
  for (const fn of cleanups.splice(0)) fn();
  vi.useRealTimers();
});

/** Polls `probe` on every turn of the event loop (setTimeout is fake here) until it holds; throws naming `what` after 10 s. */
async function waitFor(probe: () => unknown, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setImmediate(r));
  }
}

/** A relay listening in a fresh directory, with its owner's calls counted. */
async function relayWith(quietMs: number | null) {
  const dir = mkdtempSync(join(tmpdir(), 'relay-'));
  const calls = { quiet: 0, demand: 0 };
  const relay = new ResidentRelay(quietMs, { onQuiet: () => calls.quiet++, onDemand: () => calls.demand++ });
  await relay.listen(join(dir, 'agent.sock'));
  cleanups.push(() => {
    relay.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const client = (): Client => {
    const c: Client = { socket: connect(join(dir, 'agent.sock')), lines: [], isClosed: false };
    let rest = '';
    c.socket.on('data', (d) => {
      const parts = (rest + d.toString('latin1')).split('\n');
      rest = parts.pop()!;
      c.lines.push(...parts);
    });
    c.socket.on('close', () => (c.isClosed = true));
    cleanups.push(() => c.socket.destroy());
    return c;
  };
  /** A resident: the lines the relay wrote to it. */
  const resident = () => {
    const got: string[] = [];
    return { got, link: { write: (line: string) => void got.push(line.trimEnd()) } };
  };
  return { relay, calls, client, resident };
}

describe('the resident relay across a quiet period', () => {
  it('holds what a connected server sends once it suspended, and hands it to the next resident in order, once', async () => {
    const { relay, calls, client, resident } = await relayWith(QUIET_MS);
    const first = resident();
    relay.attach(first.link, GREETING(10));
    const c = client();
    await waitFor(() => c.lines.length === 1, 'the greeting');
    c.socket.write('{"id":7,"request":{"op":"get"}}\n');
    await waitFor(() => first.got.length === 1, 'the request to reach the resident');
    expect(first.got[0]).toBe('{"id":1,"request":{"op":"get"}}');
    // In flight: no suspension however long it takes.
    vi.advanceTimersByTime(10 * QUIET_MS);
    expect(calls.quiet).toBe(0);
    expect(relay.fromResident('{"id":1,"response":{"ok":true}}')).toBe(true);
    await waitFor(() => c.lines.length === 2, 'the answer');
    expect(c.lines[1]).toBe('{"id":7,"response":{"ok":true}}');
    vi.advanceTimersByTime(QUIET_MS - 1);
    expect(calls.quiet).toBe(0);
    vi.advanceTimersByTime(1);
    expect(calls.quiet).toBe(1);

    // Suspended: the connection stays; its frames are held and ask for a resident (once).
    c.socket.write('{"id":8,"request":{"op":"list"}}\n{"id":9,"request":{"op":"get"}}\n{"id":8,"abort":"cancelled"}\n');
    await waitFor(() => calls.demand === 1 && relay.hasDemand, 'the demand');
    expect(first.got).toHaveLength(1);
    expect(c.isClosed).toBe(false);
    const second = resident();
    relay.attach(second.link, GREETING(11));
    expect(second.got).toEqual(['{"id":2,"request":{"op":"list"}}', '{"id":3,"request":{"op":"get"}}', '{"id":2,"abort":"cancelled"}']);
    expect(calls.demand).toBe(1);
    relay.fromResident('{"id":3,"response":{"ok":3}}');
    relay.fromResident('{"id":2,"response":{"ok":2}}');
    await waitFor(() => c.lines.length === 4, 'both answers');
    // The connection keeps its first greeting; answers come back under its own ids.
    expect(c.lines.slice(2)).toEqual(['{"id":9,"response":{"ok":3}}', '{"id":8,"response":{"ok":2}}']);
  });

  it('asks for a resident when a server connects while none runs, and greets it with the new one', async () => {
    const { relay, calls, client, resident } = await relayWith(QUIET_MS);
    relay.attach(resident().link, GREETING(10));
    vi.advanceTimersByTime(QUIET_MS);
    expect(calls.quiet).toBe(1);
    const c = client();
    await waitFor(() => calls.demand === 1, 'the demand');
    expect(c.lines).toEqual([]);
    relay.attach(resident().link, GREETING(12));
    await waitFor(() => c.lines.length === 1, 'the greeting');
    expect(c.lines[0]).toBe(GREETING(12));
  });

  it('ends the connections an earlier build greeted (their held frames were never sent), and never suspends without a quiet period', async () => {
    const { relay, calls, client, resident } = await relayWith(QUIET_MS);
    relay.attach(resident().link, GREETING(10, 'a'));
    const c = client();
    await waitFor(() => c.lines.length === 1, 'the greeting');
    vi.advanceTimersByTime(QUIET_MS);
    expect(calls.quiet).toBe(1);
    c.socket.write('{"id":1,"request":{"op":"get"}}\n');
    await waitFor(() => relay.hasDemand, 'the held frame');
    const other = resident();
    relay.attach(other.link, GREETING(13, 'b'));
    await waitFor(() => c.isClosed, 'the connection to end');
    expect(other.got).toEqual([]);

    const steady = await relayWith(null);
    steady.relay.attach(resident().link, GREETING(20));
    vi.advanceTimersByTime(1000 * QUIET_MS);
    expect(steady.calls.quiet).toBe(0);
  });
});
