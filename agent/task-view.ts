// What start, get and cancel return: the observed state plus one page of each log.
import { closeSync, fstatSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LIMITS } from '../shared/limits.js';
import type { TaskState, TaskView } from '../shared/protocol.js';
import type { TaskStatus } from '../shared/status.js';
import { AgentFailure } from './errors.js';
import { TASK_FILES } from './paths.js';
import { hasNoSpaceLeft } from './no-space.js';
import { isSameLiveProcess } from './proc.js';
import { readStatus, type StatusRead } from './status-read.js';

/** Byte offsets and page size, per stream. */
export interface PageOpts {
  stdoutOffset: number;
  stderrOffset: number;
  limit: number;
  /** The most bytes of each capped stream's tail to add (see TaskViewSchema); absent: none. */
  tailBytes?: number;
}

/** A task's state as far as it can be confirmed, with the status record it came from. */
export interface ObservedTask {
  state: TaskState;
  status: TaskStatus | null;
  error?: { code: string; message: string };
}

/**
 * Reads the status and checks that a `running` task still has its supervisor (same pid and
 * start time). Anything that cannot be confirmed is `unknown`, never success; where the state
 * directory's filesystem is full, that is named as the likely cause.
 */
export function observeTask(dir: string): ObservedTask {
  return observeStatus(dir, readStatus(dir));
}

/** observeTask from a read of the task's status already made (`read`). */
export function observeStatus(dir: string, read: StatusRead): ObservedTask {
  if (read.kind === 'missing') {
    if (hasNoSpaceLeft(dir)) {
      return {
        state: 'unknown',
        status: null,
        error: {
          code: 'state_dir_full',
          message:
            "the task has no status record and the state directory's filesystem is full: most likely its supervisor could not record anything",
        },
      };
    }
    return {
      state: 'unknown',
      status: null,
      error: { code: 'no_status', message: 'the task has no status record: its supervisor never reported (or is still starting)' },
    };
  }
  if (read.kind === 'invalid') return { state: 'unknown', status: null, error: { code: 'invalid_status', message: read.message } };
  const status = read.status;
  if (status.state !== 'running') return withError(status.state, status);
  if (status.supervisor && isSameLiveProcess(status.supervisor.pid, status.supervisor.start_time)) return { state: 'running', status };
  // The supervisor may have written its final status and exited between the two looks.
  const again = readStatus(dir);
  if (again.kind === 'ok' && again.status.state !== 'running') return withError(again.status.state, again.status);
  if (hasNoSpaceLeft(dir)) {
    return {
      state: 'unknown',
      status,
      error: {
        code: 'state_dir_full',
        message:
          "the task supervisor is no longer running and the state directory's filesystem is full: most likely it could not record the outcome, which is lost",
      },
    };
  }
  return {
    state: 'unknown',
    status,
    error: {
      code: 'supervisor_missing',
      message: 'the task supervisor is no longer running (killed, or its process was replaced); the outcome cannot be confirmed',
    },
  };
}

function withError(state: TaskState, status: TaskStatus): ObservedTask {
  return status.error ? { state, status, error: status.error } : { state, status };
}

/**
 * One page of a log: at most `limit` bytes from `offset`, decoded as UTF-8. The page ends before
 * a character it would cut off (unless it holds nothing else), so a caller that reads on from
 * each next offset gets every character whole; only bytes that are no UTF-8 decode to U+FFFD.
 */
export function readPage(path: string, offset: number, limit: number): { text: string; next: number; size: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return { text: '', next: offset, size: 0 };
  }
  try {
    const size = fstatSync(fd).size;
    const want = Math.max(0, Math.min(limit, size - offset));
    if (want === 0) return { text: '', next: offset, size };
    const buf = Buffer.allocUnsafe(want);
    let got = 0;
    while (got < want) {
      const n = readSync(fd, buf, got, want - got, offset + got);
      if (n === 0) break;
      got += n;
    }
    const whole = completeLength(buf, got);
    return { text: buf.toString('utf8', 0, whole), next: offset + whole, size };
  } finally {
    closeSync(fd);
  }
}

/**
 * How many of the first `length` bytes of `buf` to return: all of them, or those before a
 * multibyte character that starts in the last three bytes and needs more than `length` holds.
 * A page of that character alone is returned as it is, so every page advances.
 */
function completeLength(buf: Buffer, length: number): number {
  for (let i = length - 1; i >= Math.max(1, length - 3); i--) {
    const byte = buf[i]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: its lead is further back
    return length - i < utf8SequenceLength(byte) ? i : length;
  }
  return length;
}

/** Bytes of the UTF-8 sequence `lead` starts (1 for ASCII and for bytes that start none). */
function utf8SequenceLength(lead: number): number {
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 1;
}

/** Current sizes of both logs (0 for a log not yet created). */
export function logSizes(dir: string): [number, number] {
  const size = (name: string) => {
    try {
      return statSync(join(dir, name)).size;
    } catch {
      return 0;
    }
  };
  return [size(TASK_FILES.stdout), size(TASK_FILES.stderr)];
}

/**
 * Refuses (invalid_request) an offset past its log's current end. Logs only grow and every next
 * offset is at most the log's size, so such an offset is a caller's mistake; reading from it
 * would skip the bytes before it unseen once the log grows past it. Called before anything acts
 * (a wait, a signal), so a refused request waits for nothing and changes nothing. An offset at
 * the log cap stays valid: no log grows past the cap, so it reads nothing, ever (a view of the
 * state alone, as the host asks for one).
 */
export function refuseOffsetsPastEnd(dir: string, page: PageOpts): void {
  const [out, err] = logSizes(dir);
  refusePastEnd('stdout', page.stdoutOffset, out);
  refusePastEnd('stderr', page.stderrOffset, err);
}

function refusePastEnd(stream: 'stdout' | 'stderr', offset: number, size: number): void {
  if (offset <= size || offset >= LIMITS.streamCapBytes) return;
  // The size is ours to tell; the caller's offset is not repeated.
  throw new AgentFailure(
    'invalid_request',
    `\`${stream}_offset\` is past the end of ${stream} (${size} bytes so far): pass a previous ${stream}_next_offset`,
  );
}

/** What a view says of a task's state and outcome, without its logs. */
export type TaskOutcome = Pick<TaskView, 'state' | 'exit_code' | 'started_at' | 'stdout_truncated' | 'stderr_truncated' | 'error'>;

/** The outcome part of the view buildView makes of `observed` (no log read). */
export function taskOutcome(observed: ObservedTask): TaskOutcome {
  const s = observed.status;
  return {
    state: observed.state,
    exit_code: s?.exit_code ?? null,
    started_at: s?.started_at ?? null,
    stdout_truncated: s?.stdout_truncated ?? false,
    stderr_truncated: s?.stderr_truncated ?? false,
    ...(observed.error ? { error: observed.error } : {}),
  };
}

/** Assembles the task view from an observation and a page of each log (logs read after the status). */
export function buildView(taskId: string, dir: string, observed: ObservedTask, page: PageOpts): TaskView {
  const out = readPage(join(dir, TASK_FILES.stdout), page.stdoutOffset, page.limit);
  const err = readPage(join(dir, TASK_FILES.stderr), page.stderrOffset, page.limit);
  const s = observed.status;
  const view: TaskView = {
    task_id: taskId,
    state: observed.state,
    exit_code: s?.exit_code ?? null,
    started_at: s?.started_at ?? null,
    finished_at: s?.finished_at ?? null,
    stdout: out.text,
    stderr: err.text,
    stdout_next_offset: out.next,
    stderr_next_offset: err.next,
    stdout_size: out.size,
    stderr_size: err.size,
    stdout_truncated: s?.stdout_truncated ?? false,
    stderr_truncated: s?.stderr_truncated ?? false,
  };
  if (page.tailBytes !== undefined && s !== null && s.state !== 'running') {
    // Only past the log's end: the tail is what follows it.
    const outTail = s.stdout_truncated && out.next >= out.size ? readTail(dir, 'stdout', page.tailBytes) : null;
    const errTail = s.stderr_truncated && err.next >= err.size ? readTail(dir, 'stderr', page.tailBytes) : null;
    if (outTail) view.stdout_tail = outTail.toString('utf8');
    if (errTail) view.stderr_tail = errTail.toString('utf8');
  }
  if (observed.error) view.error = observed.error;
  return view;
}

/**
 * The last (at most `maxBytes`) bytes of a capped stream's end as its supervisor kept it, masked;
 * null where there is none (the log was not capped, the end could not be kept, or an older
 * supervisor ran the task). Cut at a character boundary: no UTF-8 sequence is split at its start.
 */
export function readTail(dir: string, stream: 'stdout' | 'stderr', maxBytes: number): Buffer | null {
  let data: Buffer;
  try {
    data = readFileSync(join(dir, stream === 'stdout' ? TASK_FILES.stdoutTail : TASK_FILES.stderrTail));
  } catch {
    return null;
  }
  let from = Math.max(0, data.length - maxBytes);
  // Continuation bytes at the start belong to a character whose lead was cut off (at most 3).
  for (let i = 0; i < 3 && from < data.length && (data[from]! & 0xc0) === 0x80; i++) from++;
  return data.subarray(from);
}
