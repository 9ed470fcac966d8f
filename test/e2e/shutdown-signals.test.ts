// SIGINT and SIGTERM end a stdio session, and the HTTP server, with the same cleanup as EOF and
// SIGHUP: every sandbox the session made is destroyed (its keeper gone, its directory in the state
// directory gone), a log line names the signal, and the process exits 0. A failing stdin (a read
// error, not EOF) ends a stdio session the same way.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ok, serverEnv, startHttp, type HttpServer } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { isRunning } from '../support/processes.js';
import { keeperPids, spawnRawStdio, structured, type RawStdioServer } from '../support/raw-stdio.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
const env = { SANDBOX_MCP_STATE_DIR: stateDir };
const toKill: { kill(signal: NodeJS.Signals): unknown; exitCode: number | null }[] = [];

beforeAll(() => requireSandboxes());
afterAll(async () => {
  for (const p of toKill) if (p.exitCode === null) p.kill('SIGKILL');
  await destroyStateDir(stateDir);
});

/** The sandbox's directory in the state directory (where its keeper record and spec live). */
function sandboxDir(sandboxId: string): string {
  return join(stateDir, 'local', sandboxId.replace(/^local:/, ''));
}

/** The keeper of a sandbox that was just created: the one pid not in `before`. */
function newKeeper(before: Set<number>): number {
  const keeper = keeperPids(stateDir).find((pid) => !before.has(pid));
  expect(keeper, 'the new sandbox has a keeper').toBeDefined();
  expect(isRunning(keeper!)).toBe(true);
  return keeper!;
}

/** Nothing of the sandbox is left: no keeper process, no directory. */
function expectDestroyed(sandboxId: string, keeper: number): void {
  expect(isRunning(keeper), 'the keeper is gone').toBe(false);
  expect(keeperPids(stateDir)).not.toContain(keeper);
  expect(existsSync(sandboxDir(sandboxId)), 'the sandbox directory is gone').toBe(false);
}

function logLines(stderr: string): Record<string, unknown>[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A raw stdio server with one session sandbox; returns the server, the sandbox and its keeper. */
async function stdioWithSandbox(s: RawStdioServer): Promise<{ sandboxId: string; keeper: number }> {
  toKill.push(s.child);
  await s.initialize();
  const before = new Set(keeperPids(stateDir));
  const sandboxId = structured(await s.callTool(1, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
  expect(existsSync(sandboxDir(sandboxId))).toBe(true);
  return { sandboxId, keeper: newKeeper(before) };
}

describe('stdio: SIGINT and SIGTERM end the session with its cleanup', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`${signal} destroys the session's sandboxes, logs why, and exits 0`, async () => {
      const s = spawnRawStdio(env);
      const { sandboxId, keeper } = await stdioWithSandbox(s);
      s.child.kill(signal);
      expect(await s.exited).toEqual({ code: 0, signal: null });
      expectDestroyed(sandboxId, keeper);
      expect(logLines(s.stderr())).toContainEqual(expect.objectContaining({ msg: 'stdio session ending', reason: signal }));
    });
  }
});

/**
 * A TCP connection on loopback: `theirs` becomes the server's stdin, `ours` writes to it and can
 * reset it (RST), which the server's next read sees as ECONNRESET: a stdin that fails, not EOF.
 */
async function tcpPair(): Promise<{ ours: Socket; theirs: Socket }> {
  const listener = createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const { port } = listener.address() as { port: number };
  const accepted = new Promise<Socket>((resolve) => listener.once('connection', resolve));
  const theirs = connect(port, '127.0.0.1');
  theirs.pause();
  await new Promise<void>((resolve) => theirs.once('connect', resolve));
  const ours = await accepted;
  listener.close();
  return { ours, theirs };
}

describe('stdio: a failing stdin ends the session with its cleanup', () => {
  it('a read error on stdin (the connection reset) destroys the session sandboxes, logs stdin_error, and exits 0', async () => {
    const { ours, theirs } = await tcpPair();
    const child = spawn(process.execPath, [HOST_JS], { env: serverEnv(env), stdio: [theirs, 'pipe', 'pipe'] });
    toKill.push(child);
    // The child has its own copy of the descriptor; ours must not read what is meant for it.
    theirs.destroy();
    let out = '';
    let log = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (log += d.toString('utf8')));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, sig) => resolve({ code, signal: sig })),
    );
    const answer = async (id: number): Promise<Record<string, any>> => {
      return waitFor(
        () =>
          out
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as Record<string, any>)
            .find((m) => m.id === id),
        `the answer to request ${id}`,
      );
    };
    const send = (message: unknown) => ours.write(JSON.stringify(message) + '\n');
    send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    await answer(0);
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const before = new Set(keeperPids(stateDir));
    send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'create_sandbox', arguments: { timeout: 600 } } });
    const sandboxId = (await answer(1)).result.structuredContent.sandbox_id as string;
    const keeper = newKeeper(before);

    ours.resetAndDestroy();
    expect(await exited).toEqual({ code: 0, signal: null });
    expectDestroyed(sandboxId, keeper);
    expect(logLines(log)).toContainEqual(expect.objectContaining({ msg: 'stdio session ending', reason: 'stdin_error' }));
  });
});

/** Starts an HTTP server with one session and one sandbox; returns its log from now on. */
async function httpWithSandbox(): Promise<{ server: HttpServer; sandboxId: string; keeper: number; log: () => string }> {
  const server = await startHttp(env);
  toKill.push(server.process);
  let log = '';
  server.process.stderr!.on('data', (d: Buffer) => (log += d.toString('utf8')));
  const { client } = await server.connect();
  const before = new Set(keeperPids(stateDir));
  const sandboxId = (await ok(client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
  return { server, sandboxId, keeper: newKeeper(before), log: () => log };
}

describe('HTTP: SIGINT and SIGTERM stop the server after ending every session with its cleanup', () => {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    it(`${signal} destroys every session's sandboxes, logs why, and exits 0`, async () => {
      const { server, sandboxId, keeper, log } = await httpWithSandbox();
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        server.process.once('exit', (code, sig) => resolve({ code, signal: sig })),
      );
      server.process.kill(signal);
      expect(await exited).toEqual({ code: 0, signal: null });
      expectDestroyed(sandboxId, keeper);
      expect(logLines(log())).toContainEqual(expect.objectContaining({ msg: 'http server stopping', reason: signal }));
    });
  }
});
