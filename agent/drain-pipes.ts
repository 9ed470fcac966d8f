// Pipes for a command's stdout and stderr that the supervisor can drain fast. Node's default
// child-process streams allocate a buffer per read and cost about 2.3x what `cat` needs to
// drain a pipe. Instead the command writes into FIFOs: the supervisor reads them through
// net.Socket's `onread` into one reused buffer while the log has room, and once a log is full
// it hands the FIFO to `tail -c`, which drains at the kernel's pace and hands back the last bytes
// (or, failing that, to `cat > /dev/null`). mkfifo, tail and cat come with coreutils; without
// them we fall back to plain child-process pipes (slower, same result).
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { makeFifos, makeFifosBySpawn } from './fifo.js';
import { childProcess, net } from './node-modules.js';
import { removeFileQuietly } from './remove-file.js';

/** A pipe whose write end goes to the command and whose read end the supervisor drains. */
export interface FifoPipe {
  /** Blocking write end, to pass as the command's stdout or stderr. */
  writeFd: number;
  /** Non-blocking read end, to wrap in a socket. */
  readFd: number;
}

/** Creates `count` FIFO pipes (the FIFO names are unlinked at once); null if mkfifo is unavailable. */
export function createFifoPipes(dir: string, count: number): FifoPipe[] | null {
  const paths = fifoPaths(dir, count);
  return makeFifos(paths) ? openFifoPipes(paths) : null;
}

/**
 * createFifoPipes for a warm supervisor, which has time while it waits: mkfifo is spawned as a
 * command is, and one more pipe is made and drained of a byte into `sink`, so that node's spawn,
 * socket and timer code has run once before the task's command needs it (the first run of each
 * costs some 0.3-0.7 ms more than the next: code compiled and set up on first use).
 */
export async function createFifoPipesAhead(dir: string, count: number, sink: DrainSink): Promise<FifoPipe[] | null> {
  const paths = fifoPaths(dir, count + 1);
  const pipes = (await makeFifosBySpawn(paths)) ? openFifoPipes(paths) : null;
  if (!pipes) return null;
  await rehearseDrain(pipes.pop()!, sink);
  return pipes;
}

/** What drainFd hands each read to: false pauses reading. */
export type DrainSink = (bytes: Buffer, length: number) => boolean;

/** Drains one byte from `pipe` into `sink` the way a command's output is drained; closes both ends. */
async function rehearseDrain(pipe: FifoPipe, sink: DrainSink): Promise<void> {
  let reader: PipeReader | undefined;
  let timer: NodeJS.Timeout | undefined;
  const ended = new Promise<void>((resolve) => {
    try {
      reader = drainFd(pipe.readFd, Buffer.allocUnsafe(64), sink, resolve);
    } catch {
      closeQuietly(pipe.readFd);
      resolve();
    }
    timer = setTimeout(resolve, REHEARSAL_LIMIT_MS); // never waits long, whatever happens
  });
  try {
    writeSync(pipe.writeFd, '.');
  } catch {
    // the reader sees the end of the stream all the same
  }
  closeQuietly(pipe.writeFd);
  await ended;
  clearTimeout(timer);
  reader?.destroy();
}

const REHEARSAL_LIMIT_MS = 1000;

function fifoPaths(dir: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => join(dir, `.pipe-${process.pid}-${i}`));
}

/** Opens both ends of each FIFO at `paths` and unlinks the names; null (nothing left open) on failure. */
function openFifoPipes(paths: readonly string[]): FifoPipe[] | null {
  const pipes: FifoPipe[] = [];
  try {
    for (const p of paths) {
      // Open the reader first, non-blocking, so opening the writer does not wait for it.
      const readFd = openSync(p, constants.O_RDONLY | constants.O_NONBLOCK);
      // The command's end stays blocking: programs do not expect EAGAIN on stdout.
      const writeFd = openSync(p, constants.O_WRONLY);
      pipes.push({ readFd, writeFd });
    }
    return pipes;
  } catch {
    closeFifoPipes(pipes);
    return null;
  } finally {
    for (const p of paths) removeFileQuietly(p);
  }
}

/** Closes both ends of each pipe (those no command got), ignoring an end already closed. */
export function closeFifoPipes(pipes: readonly FifoPipe[]): void {
  for (const pipe of pipes) for (const fd of [pipe.readFd, pipe.writeFd]) closeQuietly(fd);
}

/** Closes `fd`, ignoring a failure: it was closed already, or a deferred write error has nowhere to go. */
export function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // nothing to do about it
  }
}

/** A reader draining one pipe into a callback. */
export interface PipeReader {
  /** Stops reading and closes our end without reporting an end of stream. */
  detach(): void;
  /** Resumes reading after onData returned false. */
  resume(): void;
  /** Closes our end (reported as the end of the stream). */
  destroy(): void;
}

/**
 * Reads `readFd` until EOF into `buffer` (shared between readers: each callback completes
 * before the next read), calling `onData(buffer, length)`; the bytes are only valid during the
 * call, and returning false pauses reading. No per-read allocation: a drained gigabyte is some
 * 250,000 reads.
 */
export function drainFd(readFd: number, buffer: Buffer, onData: DrainSink, onEnd: () => void): PipeReader {
  const { Socket } = net();
  let hasEnded = false;
  const finish = () => {
    if (!hasEnded) {
      hasEnded = true;
      onEnd();
    }
  };
  const socket = new Socket({
    fd: readFd,
    readable: true,
    writable: false,
    onread: { buffer, callback: (n: number, buf: Buffer) => onData(buf, n) },
  } as ConstructorParameters<typeof Socket>[0]);
  socket.on('end', finish);
  socket.on('error', finish);
  socket.on('close', finish);
  return {
    detach: () => {
      hasEnded = true;
      socket.destroy();
    },
    resume: () => void socket.resume(),
    destroy: () => void socket.destroy(),
  };
}

/**
 * Hands the rest of a pipe to `tail -c <keepBytes>`, which drains it at the kernel's pace and, once
 * the pipe ends, writes its last `keepBytes` bytes to its stdout (a pipe of ours: the raw bytes
 * never touch the disk). Returns the helper, or null if it could not be started. Like cat below,
 * it runs in the supervisor's own process group.
 */
export function keepRestWithTail(readFd: number, keepBytes: number): ChildProcess | null {
  return spawnPipeHelper('tail', ['-c', String(keepBytes)], [readFd, 'pipe', 'ignore']);
}

/**
 * Hands the rest of a pipe to `cat > /dev/null`: once a log is full every further byte is
 * dropped, and cat drops them at the kernel's pace instead of ours. Returns the helper, or null
 * if it could not be started (the caller keeps draining itself). The helper runs in the
 * supervisor's own process group, so signals to the task's group never reach it.
 */
export function discardRestWithCat(readFd: number): ChildProcess | null {
  // libuv makes a child's stdin blocking, which cat needs (our end was non-blocking).
  return spawnPipeHelper('cat', [], [readFd, 'ignore', 'ignore']);
}

/** Spawns a helper reading a pipe on its stdin; null if it could not be started. */
function spawnPipeHelper(file: string, args: string[], stdio: [number, 'pipe' | 'ignore', 'ignore']): ChildProcess | null {
  try {
    const helper = childProcess().spawn(file, args, { stdio });
    if (helper.pid === undefined) {
      helper.on('error', () => {});
      return null;
    }
    return helper;
  } catch {
    return null;
  }
}
