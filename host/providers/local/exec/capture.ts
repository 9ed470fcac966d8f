// Runs one command on the host side of a sandbox entry (setpriv/nsenter chain) and captures its
// output: capped per stream while the rest is drained, a timeout (or the caller's abort) that
// kills the whole process group, and an optional side channel on fd 3 for the provider's own scripts.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { definedFields } from '../../../util/defined-fields.js';
import { OutputCapture } from '../../output-capture.js';
import type { ExecResult } from '../../provider.js';
import type { Command } from '../launch/command-lines.js';
import { coverInherited, type FdCover } from '../system/inherited-fds.js';

/** How captureCommand runs one command: its environment, input, bounds and side channels. */
export interface CaptureOpts {
  env: Record<string, string>;
  stdin?: Buffer;
  timeoutMs: number;
  /** Per-stream capture cap; bytes beyond it are read and dropped. */
  maxOutputBytes: number;
  /** Keep the first and last halves of the cap (exec output) instead of the first bytes (file reads). */
  keepTail?: boolean;
  /** Opens fd 3 as a pipe back to us (scripts report metadata there). */
  withMetaFd?: boolean;
  /** Written to the command's fd 4 (envPrelude sources the sandbox environment from it). */
  envScript?: string;
  /** Open descriptors of ours the command gets as fd 5, 6, … (the cgroup.procs files its first shell joins). */
  passFds?: readonly number[];
  /**
   * After the command exits, how long to wait for its pipes to close: background processes it
   * started may hold them open forever, and must not hold the call open.
   */
  drainGraceMs?: number;
  /** How long to wait for the process to exit after the timeout's SIGKILL before giving up. */
  killWaitMs?: number;
  /** Told the process group id once the command runs (so a kill can end it early). */
  onSpawn?: (pgid: number) => void;
  /**
   * Told when the leader has exited and been reaped: from then on its pid, and so the group id,
   * may be reused by an unrelated process, and must no longer be signalled.
   */
  onExit?: () => void;
  /** Inherited descriptors to cover with /dev/null in the child (see coverInherited). */
  cover?: FdCover;
  /**
   * The caller gave up: kills the process group as the timeout does (timedOut stays false).
   * Already aborted, nothing is spawned (CancelledError).
   */
  signal?: AbortSignal;
}

/**
 * How a captured command ended and what it wrote (each stream within its cap): ExecResult's
 * capture fields, the contract's, plus what only the local provider reads.
 */
export interface CaptureResult extends Omit<ExecResult, 'notes'> {
  /** The signal that ended the process, when one did. */
  signal: NodeJS.Signals | null;
  /** What the command wrote to its meta descriptor (withMetaFd), else empty. */
  meta: Buffer;
}

/** Why a command could not be started at all (no text of the system's). */
export class SpawnFailedError extends Error {
  constructor(readonly code: string) {
    super('spawn failed');
    this.name = 'SpawnFailedError';
  }
}

class CappedSink {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  truncated = false;
  constructor(private readonly cap: number) {}
  push(chunk: Buffer): void {
    const room = this.cap - this.size;
    if (room <= 0) {
      if (chunk.length > 0) this.truncated = true;
      return;
    }
    if (chunk.length > room) {
      this.chunks.push(chunk.subarray(0, room));
      this.size += room;
      this.truncated = true;
    } else {
      this.chunks.push(chunk);
      this.size += chunk.length;
    }
  }
  buffer(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }
  /** Every kept byte is from the stream's start. */
  get headBytes(): number {
    return this.size;
  }
}

/** OutputCapture behind CappedSink's face: head and tail of the cap. */
class TailKeepingSink {
  private readonly capture: OutputCapture;
  constructor(cap: number) {
    this.capture = new OutputCapture(cap);
  }
  push(chunk: Buffer): void {
    this.capture.push(chunk);
  }
  get truncated(): boolean {
    return this.capture.truncated;
  }
  buffer(): Buffer {
    return this.capture.data;
  }
  get headBytes(): number {
    return this.capture.splitAt;
  }
}

/** The signal was aborted before the command could start: nothing was spawned. */
export class CancelledError extends Error {
  constructor() {
    super('cancelled');
    this.name = 'CancelledError';
  }
}

/** The command's descriptors: 0-2, then 3 (meta), 4 (environment) and 5… (passFds) as asked. */
function childStdio(opts: CaptureOpts): ('pipe' | 'ignore' | number)[] {
  const stdio: ('pipe' | 'ignore' | number)[] = [opts.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'];
  const passFds = opts.passFds ?? [];
  if (opts.withMetaFd || opts.envScript !== undefined || passFds.length > 0) stdio.push(opts.withMetaFd ? 'pipe' : 'ignore');
  if (opts.envScript !== undefined || passFds.length > 0) stdio.push(opts.envScript !== undefined ? 'pipe' : 'ignore');
  stdio.push(...passFds);
  return stdio;
}

/**
 * Spawns `cmd` in a new process group and captures it; never rejects except for SpawnFailedError
 * and (signal already aborted, nothing spawned) CancelledError.
 */
export function captureCommand(cmd: Command, opts: CaptureOpts): Promise<CaptureResult> {
  const drainGraceMs = opts.drainGraceMs ?? 100;
  const killWaitMs = opts.killWaitMs ?? 5000;
  const abortSignal = opts.signal;
  if (abortSignal?.aborted) return Promise.reject(new CancelledError());
  return new Promise((resolve, reject) => {
    const child = spawn(cmd.file, cmd.args, {
      cwd: '/',
      env: opts.env,
      detached: true,
      ...definedFields({ uid: cmd.uid, gid: cmd.gid }),
      stdio: coverInherited(childStdio(opts), opts.cover),
    });
    if (child.pid !== undefined) opts.onSpawn?.(child.pid);
    const sink = () => (opts.keepTail ? new TailKeepingSink(opts.maxOutputBytes) : new CappedSink(opts.maxOutputBytes));
    const out = sink();
    const err = sink();
    const meta = new CappedSink(64 * 1024);
    let timedOut = false;
    let settled = false;
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    const timers: NodeJS.Timeout[] = [];
    const streams = [child.stdout, child.stderr, child.stdio[3] as Readable | null | undefined];

    const settle = (): void => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      abortSignal?.removeEventListener('abort', onAbort);
      for (const s of streams) s?.destroy();
      const code = exit?.code ?? null;
      const signal = exit?.signal ?? null;
      resolve({
        exitCode: code !== null ? code : signal ? 128 + (constants.signals[signal] ?? 0) : null,
        signal,
        stdout: out.buffer(),
        stderr: err.buffer(),
        stdoutTruncated: out.truncated,
        stderrTruncated: err.truncated,
        stdoutHeadBytes: out.headBytes,
        stderrHeadBytes: err.headBytes,
        timedOut,
        meta: meta.buffer(),
      });
    };
    const killGroup = (): void => {
      if (child.pid !== undefined) killProcessGroup(child.pid);
    };
    let killing = false;
    // Once the leader is reaped its group id may be reused: after exit, only the drain grace remains.
    const kill = (): void => {
      if (exit || killing) return;
      killing = true;
      killGroup();
      timers.push(setTimeout(settle, killWaitMs));
    };
    const onAbort = (): void => kill();
    abortSignal?.addEventListener('abort', onAbort, { once: true });

    child.on('error', (e: NodeJS.ErrnoException) => {
      if (settled) return;
      settled = true;
      for (const t of timers) clearTimeout(t);
      abortSignal?.removeEventListener('abort', onAbort);
      reject(new SpawnFailedError(e.code ?? 'spawn'));
    });
    child.stdout?.on('data', (b: Buffer) => out.push(b));
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    (child.stdio[3] as Readable | undefined)?.on('data', (b: Buffer) => meta.push(b));
    for (const s of streams) s?.on('error', () => {});
    const envPipe = opts.envScript !== undefined ? (child.stdio[4] as unknown as Writable | null) : null;
    if (envPipe) {
      envPipe.on('error', () => {});
      envPipe.end(opts.envScript);
    }
    if (opts.stdin && child.stdin) {
      child.stdin.on('error', () => {});
      child.stdin.end(opts.stdin);
    }
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      opts.onExit?.();
      timers.push(setTimeout(settle, drainGraceMs));
    });
    child.on('close', settle);
    timers.push(
      setTimeout(() => {
        if (exit || killing) return;
        timedOut = true;
        kill();
      }, opts.timeoutMs),
    );
  });
}

/** SIGKILLs a process group and continues it: a stopped nsenter would otherwise never exit. */
export function killProcessGroup(pgid: number): void {
  for (const sig of ['SIGKILL', 'SIGCONT'] as const) {
    try {
      process.kill(-pgid, sig);
    } catch {
      // Already gone.
    }
  }
}
