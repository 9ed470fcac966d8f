// input: write text to a running task's stdin, and close it after the text if asked (`eof`).
// The pipe belongs to the task's supervisor, so any process may do this, e.g. a host restarted
// since `start`. A full pipe (the command is not reading) never hangs the op: it writes what fits
// within Timings.inputWaitMs and reports how many bytes were taken. Input is not masked, and
// nothing of it is logged.
import { closeSync } from 'node:fs';
import type { InputResult } from '../../shared/protocol.js';
import type { TaskStatus } from '../../shared/status.js';
import { AgentFailure } from '../errors.js';
import { isSameLiveProcess } from '../proc.js';
import { markAsked } from '../cancel-mark.js';
import { isStdinClosed, isStdinFifoGone, openStdinForInput, STDIN_EOF_SIGNAL, writeWithin, type StdinOpenFailure } from '../stdin-pipe.js';
import { readTaskRequest } from '../task-request.js';
import { observeTask } from '../task-view.js';
import { sleep, type Timings } from '../timing.js';
import { existingTaskDir } from './task-dir.js';

/** A validated input request. */
export interface InputOpts {
  taskId: string;
  /** UTF-8 text, already checked against the size cap. */
  data: Buffer;
  eof: boolean;
}

/** Delivers the input to a running task; fails with task_finished, no_stdin or stdin_closed saying why it cannot. */
export async function sendInput(opts: InputOpts, timings: Timings): Promise<InputResult> {
  const dir = existingTaskDir(opts.taskId);
  const observed = observeTask(dir);
  if (observed.state !== 'running') {
    throw new AgentFailure(
      'task_finished',
      observed.state === 'unknown'
        ? 'the task is not running (its state is unknown: the supervisor that held its stdin is gone); input cannot be delivered'
        : `the task has finished (${observed.state}); input cannot be delivered`,
    );
  }
  const delivered = await deliverInput(dir, observed.status!, opts.data, opts.eof, timings);
  return { task_id: opts.taskId, ...delivered };
}

/** Writes `bytes` to the stdin of the task supervised as `status`, then closes it if `eof` and every byte was taken. */
export async function deliverInput(
  dir: string,
  status: TaskStatus,
  bytes: Buffer,
  eof: boolean,
  timings: Timings,
): Promise<Omit<InputResult, 'task_id'>> {
  // Closing an already closed stdin is no error: a repeated `eof` finds what it asked for.
  if (bytes.length === 0 && eof && isStdinClosed(dir)) return { bytes_written: 0, stdin_closed: true };
  const opened = openStdinForInput(dir);
  if ('failure' in opened) throw refusal(dir, opened.failure);
  let written: number | 'no_reader';
  try {
    written = await writeWithin(opened.fd, bytes, timings.inputWaitMs);
  } finally {
    closeSync(opened.fd);
  }
  if (written === 'no_reader') throw refusal(dir, 'no_reader');
  // EOF after part of the data would cut off the rest, which the caller is told to send again.
  const isClosed = eof && written === bytes.length ? await closeViaSupervisor(dir, status, timings) : false;
  return { bytes_written: written, stdin_closed: isClosed };
}

/** Asks the verified supervisor to close its end of the pipe; true once it confirmed (bounded wait). */
async function closeViaSupervisor(dir: string, status: TaskStatus, timings: Timings): Promise<boolean> {
  const sup = status.supervisor;
  // Verified by pid and start time right before signalling, as cancel does.
  if (!sup || !isSameLiveProcess(sup.pid, sup.start_time)) return isStdinFifoGone(dir);
  // Before the signal: a reused supervisor acts on it only for the task marked (cancel-mark.ts).
  markAsked(dir, 'eof');
  try {
    process.kill(sup.pid, STDIN_EOF_SIGNAL);
  } catch {
    return isStdinFifoGone(dir);
  }
  const giveUpAtMs = Date.now() + timings.inputWaitMs;
  while (!isStdinFifoGone(dir)) {
    if (Date.now() >= giveUpAtMs) return false;
    await sleep(5);
  }
  return true;
}

function refusal(dir: string, failure: StdinOpenFailure | 'no_reader'): AgentFailure {
  switch (failure) {
    case 'closed':
      return new AgentFailure('stdin_closed', "the task's stdin was already closed (by an earlier input with `eof`)");
    case 'no_reader':
      return new AgentFailure('stdin_closed', 'the command is not reading its stdin any more (it closed it, or is exiting)');
    case 'not_a_fifo':
      return new AgentFailure('no_stdin', "the task's stdin pipe was replaced by something else in its task directory");
    case 'missing':
      return noStdinBecause(dir);
  }
}

/** The reason a running task has no stdin FIFO, told from its request file. */
function noStdinBecause(dir: string): AgentFailure {
  let stdin: boolean | undefined;
  try {
    stdin = readTaskRequest(dir).stdin;
  } catch {
    stdin = undefined;
  }
  if (stdin === false) return new AgentFailure('no_stdin', 'the task was started with `stdin: false`: its stdin is /dev/null');
  if (stdin === undefined) {
    return new AgentFailure('no_stdin', 'the task was started by an older agent, without a stdin pipe; start it again to give it input');
  }
  return new AgentFailure(
    'no_stdin',
    'the task has no stdin pipe: none could be made in this sandbox (mkfifo is missing), so it reads /dev/null',
  );
}
