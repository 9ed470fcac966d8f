// Runs one command on the host side of a sandbox entry (setpriv/nsenter chain) and captures its
// output: capped per stream while the rest is drained, a timeout (or the caller's abort) that
// kills the whole process group, and an optional side channel on fd 3 for the provider's own scripts.
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { definedFields } from '../../../util/defined-fields.js';
import { HeadCapture, OutputCapture, type OutputSink } from '../../output-capture.js';
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

/** The signal was aborted before the command could start: nothing was spawned. */
export class CancelledError extends Error {
  constructor() {
    super('cancelled');
    this.name = 'CancelledError';
  }
}

/** Why we stopped a command's process group: the first of its timeout and the caller's abort. */
type StopReason = 'timeout' | 'abort';

/** How the group leader ended. */
interface LeaderExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** One command as captureCommand runs it: what its phases below read and update. */
interface CaptureRun {
  readonly child: ChildProcess;
  readonly opts: CaptureOpts;
  /** Null while the leader runs. Once it is reaped its group id may be reused: no more signals. */
  exit: LeaderExit | null;
  /** Set by the first stop, never changed; null when nobody stopped the command. */
  stopReason: StopReason | null;
  /** Timers that end or stop the run, cleared once it ended. */
  readonly timers: NodeJS.Timeout[];
  /** Settles once: resolved by the first way the run ends, rejected only when the spawn failed. */
  readonly end: Settler;
}

/** The three capped streams a command's output goes into. */
interface Sinks {
  stdout: OutputSink;
  stderr: OutputSink;
  meta: OutputSink;
}

/** drainGraceMs and killWaitMs unless the caller says otherwise. */
const DEFAULT_DRAIN_GRACE_MS = 100;
const DEFAULT_KILL_WAIT_MS = 5000;

/** What the meta descriptor may carry (scripts report a few fields there). */
const META_CAP_BYTES = 64 * 1024;

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
export async function captureCommand(cmd: Command, opts: CaptureOpts): Promise<CaptureResult> {
  if (opts.signal?.aborted) throw new CancelledError();
  const run = spawnInGroup(cmd, opts);
  const sinks = pipeIntoSinks(run);
  feedInputs(run);
  const disarm = armTermination(run);
  try {
    await awaitEnd(run);
  } finally {
    disarm();
  }
  return resultOf(run, sinks);
}

// --- spawn ----------------------------------------------------------------------------------------

function spawnInGroup(cmd: Command, opts: CaptureOpts): CaptureRun {
  const child = spawn(cmd.file, cmd.args, {
    cwd: '/',
    env: opts.env,
    detached: true,
    ...definedFields({ uid: cmd.uid, gid: cmd.gid }),
    stdio: coverInherited(childStdio(opts), opts.cover),
  });
  if (child.pid !== undefined) opts.onSpawn?.(child.pid);
  return { child, opts, exit: null, stopReason: null, timers: [], end: settler() };
}

// --- pipes ----------------------------------------------------------------------------------------

/** The streams we read: stdout, stderr and the meta descriptor (when asked for). */
function readStreams(child: ChildProcess): (Readable | null | undefined)[] {
  return [child.stdout, child.stderr, child.stdio[3] as Readable | null | undefined];
}

/** Every stream we read goes into its capped sink; a stream's error only ends it. */
function pipeIntoSinks({ child, opts }: CaptureRun): Sinks {
  const outputSink = (): OutputSink => (opts.keepTail ? new OutputCapture(opts.maxOutputBytes) : new HeadCapture(opts.maxOutputBytes));
  const sinks: Sinks = { stdout: outputSink(), stderr: outputSink(), meta: new HeadCapture(META_CAP_BYTES) };
  const [stdout, stderr, meta] = readStreams(child);
  stdout?.on('data', (b: Buffer) => sinks.stdout.push(b));
  stderr?.on('data', (b: Buffer) => sinks.stderr.push(b));
  meta?.on('data', (b: Buffer) => sinks.meta.push(b));
  for (const s of readStreams(child)) s?.on('error', () => {});
  return sinks;
}

/** Writes the environment script to fd 4 and the input to stdin, each then closed; a reader gone early is no failure. */
function feedInputs({ child, opts }: CaptureRun): void {
  const envPipe = opts.envScript !== undefined ? (child.stdio[4] as unknown as Writable | null) : null;
  if (envPipe) {
    envPipe.on('error', () => {});
    envPipe.end(opts.envScript);
  }
  if (opts.stdin && child.stdin) {
    child.stdin.on('error', () => {});
    child.stdin.end(opts.stdin);
  }
}

// --- termination ----------------------------------------------------------------------------------

/** Stops the group at the timeout or when the caller aborts; returns what disarms both. */
function armTermination(run: CaptureRun): () => void {
  const onAbort = (): void => stop(run, 'abort');
  run.opts.signal?.addEventListener('abort', onAbort, { once: true });
  run.timers.push(setTimeout(() => stop(run, 'timeout'), run.opts.timeoutMs));
  return () => {
    for (const t of run.timers) clearTimeout(t);
    run.opts.signal?.removeEventListener('abort', onAbort);
  };
}

/**
 * Kills the group, unless the leader already exited (its group id may be reused) or a stop came
 * first; then waits killWaitMs at most for the end.
 */
function stop(run: CaptureRun, reason: StopReason): void {
  if (run.exit || run.stopReason) return;
  run.stopReason = reason;
  if (run.child.pid !== undefined) killProcessGroup(run.child.pid);
  endAfter(run, run.opts.killWaitMs ?? DEFAULT_KILL_WAIT_MS);
}

// --- the end --------------------------------------------------------------------------------------

/**
 * The first of: every pipe closed; the drain grace after the leader's exit (background processes
 * it started may hold the pipes forever); the kill wait after a stop. A failed spawn rejects.
 */
function awaitEnd(run: CaptureRun): Promise<void> {
  const { child, opts } = run;
  child.on('error', (e: NodeJS.ErrnoException) => run.end.reject(new SpawnFailedError(e.code ?? 'spawn')));
  child.on('exit', (code, signal) => {
    run.exit = { code, signal };
    opts.onExit?.();
    endAfter(run, opts.drainGraceMs ?? DEFAULT_DRAIN_GRACE_MS);
  });
  child.on('close', () => run.end.resolve());
  return run.end.promise;
}

function endAfter(run: CaptureRun, ms: number): void {
  if (!run.end.isSettled) run.timers.push(setTimeout(() => run.end.resolve(), ms));
}

/** The outcome and what was kept of each stream; the pipes still open (held by background processes) are closed. */
function resultOf(run: CaptureRun, sinks: Sinks): CaptureResult {
  for (const s of readStreams(run.child)) s?.destroy();
  const code = run.exit?.code ?? null;
  const signal = run.exit?.signal ?? null;
  return {
    exitCode: code !== null ? code : signal ? 128 + (constants.signals[signal] ?? 0) : null,
    signal,
    stdout: sinks.stdout.data,
    stderr: sinks.stderr.data,
    stdoutTruncated: sinks.stdout.isTruncated,
    stderrTruncated: sinks.stderr.isTruncated,
    stdoutHeadBytes: sinks.stdout.splitAt,
    stderrHeadBytes: sinks.stderr.splitAt,
    timedOut: run.stopReason === 'timeout',
    meta: sinks.meta.data,
  };
}

/** A promise with its settle functions at hand (Node 20 has no Promise.withResolvers); the first call wins. */
interface Settler {
  readonly promise: Promise<void>;
  readonly isSettled: boolean;
  resolve(): void;
  reject(error: Error): void;
}

function settler(): Settler {
  let settle!: { resolve: () => void; reject: (e: Error) => void };
  const promise = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
  const s = {
    promise,
    isSettled: false,
    resolve() {
      if (s.isSettled) return;
      s.isSettled = true;
      settle.resolve();
    },
    reject(error: Error) {
      if (s.isSettled) return;
      s.isSettled = true;
      settle.reject(error);
    },
  };
  return s;
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
