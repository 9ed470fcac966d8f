// A raw line-level stdio client for the BUILT server: writes exactly the bytes a test gives it
// (malformed, oversized) and collects every line the server answers, which the SDK's Client
// would never send or would hide.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseProcStat } from '../../shared/proc-stat.js';
import { HOST_JS, serverEnv, waitFor } from './harness.js';

/** One JSON-RPC message the server wrote. */
export type Answer = { id?: string | number; result?: any; error?: { code: number; message: string } };

export interface RawStdioServer {
  child: ChildProcess;
  /** Writes one line (a value is serialised; a string or Buffer is written as is) plus the newline. */
  send(message: unknown): Promise<void>;
  /** Waits for the answer to request `id`. */
  answer(id: string | number, timeoutMs?: number): Promise<Answer>;
  /** Every line the server answered so far. */
  answers(): Answer[];
  stderr(): string;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** initialize + notifications/initialized. */
  initialize(): Promise<void>;
  /** tools/call by raw request; returns the answer. */
  callTool(id: number, name: string, args: unknown): Promise<Answer>;
}

/** Spawns dist/host.js over stdio with a clean environment. */
export function spawnRawStdio(env: Record<string, string>): RawStdioServer {
  const child = spawn(process.execPath, [HOST_JS], { env: serverEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  const received: Answer[] = [];
  let partial = '';
  let log = '';
  child.stdout!.on('data', (d: Buffer) => {
    partial += d.toString('utf8');
    const lines = partial.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.trim()) received.push(JSON.parse(line) as Answer);
  });
  child.stderr!.on('data', (d: Buffer) => (log += d.toString('utf8')));
  // The server may close its end first (that is what some tests provoke).
  child.stdin!.on('error', () => undefined);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const send = (message: unknown) =>
    new Promise<void>((resolve) => {
      const bytes = typeof message === 'string' || Buffer.isBuffer(message) ? message : JSON.stringify(message);
      child.stdin!.write(bytes);
      child.stdin!.write('\n', () => resolve());
    });
  const answer = async (id: string | number, timeoutMs = 30_000) => {
    await waitFor(() => received.some((a) => a.id === id), `the answer to request ${String(id)}`, timeoutMs, 20);
    return received.find((a) => a.id === id)!;
  };
  return {
    child,
    send,
    answer,
    answers: () => received,
    stderr: () => log,
    exited,
    async initialize() {
      await send({
        jsonrpc: '2.0',
        id: 'init',
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
      });
      await answer('init');
      await send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    },
    async callTool(id, name, args) {
      await send({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } });
      return answer(id);
    },
  };
}

/** The structured result of a successful raw tools/call answer. */
export function structured(a: Answer): Record<string, any> {
  if (a.error || a.result?.isError) throw new Error(`call failed: ${JSON.stringify(a)}`);
  return a.result.structuredContent as Record<string, any>;
}

/** Pids of the keepers of every local sandbox in a state directory. */
export function keeperPids(stateDir: string): number[] {
  const root = join(stateDir, 'local');
  const pids: number[] = [];
  for (const id of safeReaddir(root)) {
    try {
      pids.push((JSON.parse(readFileSync(join(root, id, 'keeper.json'), 'utf8')) as { keeper: { pid: number } }).keeper.pid);
    } catch {
      // Not started yet, or already gone.
    }
  }
  return pids;
}

function safeReaddir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** True while `pid` is a live process: a zombie (dead, waiting for a parent that may never reap it) is not. */
export function isRunning(pid: number): boolean {
  try {
    const state = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.state;
    return state !== undefined && !['Z', 'X', 'x'].includes(state);
  } catch {
    return false;
  }
}
