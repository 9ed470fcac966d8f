// The stdio server under input no client library would send, and under every way its session can
// end: an oversized line is answered and the session goes on; EOF, SIGHUP and a vanished reader
// all end in the same cleanup (no keeper of the session survives) with a log line saying why; so
// does a fault of the process outside any request, which then exits nonzero.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FIXTURES } from '../support/paths.js';
import { PROTOTYPE_KEYS } from '../support/prototype-keys.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { keeperPids, type RawStdioServer, spawnRawStdio, structured } from '../support/raw-stdio.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
/** The faults' message (test/fixtures/fault-on-signal.mjs), which the server must never log. */
const FAULT_MARKER = 'FAULT-MESSAGE-MARKER-NEVER-LOGGED';
const env = { SANDBOX_MCP_STATE_DIR: stateDir };
const started: RawStdioServer[] = [];

function server(extraEnv: Record<string, string> = {}): RawStdioServer {
  const s = spawnRawStdio({ ...env, ...extraEnv });
  started.push(s);
  return s;
}

beforeAll(() => requireSandboxes());
afterAll(async () => {
  for (const s of started) if (s.child.exitCode === null) s.child.kill('SIGKILL');
  await destroyStateDir(stateDir);
});

/** Creates a sandbox in the session and returns its keeper's pid. */
async function sandboxWithKeeper(s: RawStdioServer, id: number): Promise<{ sandboxId: string; keeper: number }> {
  const before = new Set(keeperPids(stateDir));
  const sandboxId = structured(await s.callTool(id, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
  const keeper = keeperPids(stateDir).find((pid) => !before.has(pid));
  expect(keeper, 'the new sandbox has a keeper').toBeDefined();
  expect(isRunning(keeper!)).toBe(true);
  return { sandboxId, keeper: keeper! };
}

function logLines(s: RawStdioServer): Record<string, unknown>[] {
  return s
    .stderr()
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('stdio: oversized and malformed input', () => {
  it('answers an 11 MiB line with a JSON-RPC error for its id, keeps serving, and cleans up at EOF', async () => {
    const s = server();
    await s.initialize();
    const { keeper } = await sandboxWithKeeper(s, 1);
    const marker = 'OVERSIZED-CONTENT-MARKER';
    // The SDK client's own layout: `id` after `params`, at the far end of the line.
    const huge = `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"big.txt","content":"${marker}${'a'.repeat(11 * 1024 * 1024)}"}},"id":2}`;
    await s.send(huge);
    const refused = await s.answer(2);
    expect(refused.error?.code).toBe(-32600);
    expect(refused.error?.message).toMatch(/larger than .*limit of 10485760 bytes/);
    expect(JSON.stringify(refused)).not.toContain(marker);
    // The session goes on: the same server still answers, and its sandbox is still there.
    expect(structured(await s.callTool(3, 'run_command', { command: 'echo still-here' })).stdout).toBe('still-here\n');
    expect(isRunning(keeper)).toBe(true);

    s.child.stdin!.end();
    expect((await s.exited).code).toBe(0);
    expect(isRunning(keeper)).toBe(false);
    expect(keeperPids(stateDir)).not.toContain(keeper);
    const lines = logLines(s);
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'refused a message', reason: 'oversized' }));
    expect(lines).toContainEqual(expect.objectContaining({ msg: 'stdio session ending', reason: 'eof' }));
    expect(s.stderr()).not.toContain(marker);
  });

  it('answers odd JSON-RPC with errors that name the problem and never echo a value', async () => {
    const s = server();
    await s.initialize();
    const secret = 'ODD-VALUE-NEVER-ECHOED';

    await s.send({ jsonrpc: '2.0', id: 10, method: 'tools/call', params: null });
    expect((await s.answer(10)).error).toEqual({ code: -32600, message: 'Invalid Request: field `params` must be an object' });

    await s.send({ jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'get_sandbox', arguments: [secret] } });
    expect((await s.answer(11)).error).toEqual({ code: -32602, message: 'Invalid params: field `params.arguments` must be an object' });

    await s.send({ jsonrpc: '2.0', id: 12, method: 'tools/call', params: { name: 42, arguments: {} } });
    expect((await s.answer(12)).error).toEqual({ code: -32602, message: 'Invalid params: field `params.name` must be a string' });

    await s.send({ jsonrpc: '1.0', id: 13, method: 'ping' });
    expect((await s.answer(13)).error?.message).toBe('Invalid Request: field `jsonrpc` must be "2.0"');

    // A bound beyond the safe integers names the tool's own bound, not 2^53 - 1.
    const huge = await s.callTool(14, 'run_command', { command: 'true', timeout: 1e308 });
    expect(huge.result?.isError).toBe(true);
    expect(huge.result.content[0].text).toContain('field `timeout` is too large (maximum 3600)');
    const tiny = await s.callTool(15, 'get_task', { sandbox_id: 'local:abc', task_id: 'a'.repeat(32), wait: -1e308 });
    expect(tiny.result.content[0].text).toContain('field `wait` is too small (minimum 0)');

    // Not JSON at all: a parse error, which has no id to answer with.
    const before = s.answers().length;
    await s.send(`{"jsonrpc":"2.0","id":16,"method":"${secret}`);
    await waitFor(() => s.answers().length > before, 'the parse error');
    expect(s.answers()[before]).toEqual({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error: the line is not JSON' } });

    // Still serving after all of it.
    await s.send({ jsonrpc: '2.0', id: 17, method: 'ping' });
    expect((await s.answer(17)).result).toEqual({});
    expect(JSON.stringify(s.answers())).not.toContain(secret);
    expect(s.stderr()).not.toContain(secret);
    s.child.stdin!.end();
    expect((await s.exited).code).toBe(0);
  });

  it('answers method names that are Object.prototype keys as any unknown method (-32601), and keeps serving', async () => {
    const s = server();
    await s.initialize();
    await s.send({ jsonrpc: '2.0', id: 'unknown', method: 'no/such/method' });
    const unknown = await s.answer('unknown');
    expect(unknown.error?.code).toBe(-32601);
    for (const method of PROTOTYPE_KEYS) {
      // A notification of that name has no answer (and must not stop the next request's).
      await s.send({ jsonrpc: '2.0', method });
      await s.send({ jsonrpc: '2.0', id: method, method });
      expect(await s.answer(method), method).toEqual({ ...unknown, id: method });
    }
    await s.send({ jsonrpc: '2.0', id: 'ping', method: 'ping' });
    expect((await s.answer('ping')).result).toEqual({});
    expect(s.answers()).toHaveLength(PROTOTYPE_KEYS.length + 3);
    s.child.stdin!.end();
    expect((await s.exited).code).toBe(0);
  });
});

describe('stdio: every way a session ends cleans up', () => {
  it('SIGHUP (the terminal closed) destroys the session sandboxes like SIGTERM', async () => {
    const s = server();
    await s.initialize();
    const { keeper } = await sandboxWithKeeper(s, 1);
    s.child.kill('SIGHUP');
    expect(await s.exited).toEqual({ code: 0, signal: null });
    expect(isRunning(keeper)).toBe(false);
    expect(keeperPids(stateDir)).not.toContain(keeper);
    expect(logLines(s)).toContainEqual(expect.objectContaining({ msg: 'stdio session ending', reason: 'SIGHUP' }));
  });

  it('a reader that went away (EPIPE on stdout) ends the session with the same cleanup', async () => {
    const s = server();
    await s.initialize();
    const { keeper } = await sandboxWithKeeper(s, 1);
    // Close our read end of the server's stdout, then make the server write.
    s.child.stdout!.destroy();
    await s.send({ jsonrpc: '2.0', id: 2, method: 'ping' });
    expect((await s.exited).code).toBe(0);
    expect(isRunning(keeper)).toBe(false);
    expect(keeperPids(stateDir)).not.toContain(keeper);
    expect(logLines(s)).toContainEqual(expect.objectContaining({ msg: 'stdio session ending', reason: 'stdout_error' }));
  });
});

describe('stdio: a fault outside any request', () => {
  // A real fault in the real process: a preload (test/fixtures/fault-on-signal.mjs) throws from a
  // SIGUSR2 listener, or rejects a promise nobody handles, exactly as a bug in a timer would.
  const faulty = (kind: string) => ({
    NODE_OPTIONS: `--import ${join(FIXTURES, 'fault-on-signal.mjs')}`,
    FAULT_ON_SIGUSR2: kind,
    FAULT_MESSAGE: FAULT_MARKER,
  });
  const cases = [
    ['exception', 'uncaught_exception'],
    ['rejection', 'unhandled_rejection'],
  ] as const;

  for (const [kind, logged] of cases) {
    it(`an unhandled ${kind} is logged in one line without its message, the session's sandboxes are destroyed, and the exit is nonzero`, async () => {
      const s = server(faulty(kind));
      await s.initialize();
      const { keeper } = await sandboxWithKeeper(s, 1);
      s.child.kill('SIGUSR2');
      expect(await s.exited).toEqual({ code: 70, signal: null });
      expect(isRunning(keeper)).toBe(false);
      expect(keeperPids(stateDir)).not.toContain(keeper);
      const lines = logLines(s);
      const faults = lines.filter((l) => l.kind !== undefined);
      expect(faults).toEqual([expect.objectContaining({ level: 'warn', kind: logged, error: 'Error' })]);
      expect(lines).toContainEqual(expect.objectContaining({ msg: 'stdio session ending', reason: logged }));
      expect(s.stderr()).not.toContain(FAULT_MARKER);
    });
  }
});
