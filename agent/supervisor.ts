// The per-task supervisor (`agent.cjs supervise <task dir>`), started detached by `start`.
// Like tini: a linear start-up (read the request, open logs, spawn the command in its own
// process group, record `running`), then events until done: output is masked into capped logs,
// a timeout or a cancel (SIGTERM to us) escalates TERM -> KILL on the group, and when the group
// leader exits the remaining group members are cleaned up, the pipes drained, the final status
// written. The first termination reason wins.
import type { ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join } from 'node:path';
import { LIMITS } from '../shared/limits.js';
import { STATUS_FORMAT_VERSION, type TaskStatus, type TerminationReason } from '../shared/status.js';
import { CappedLog } from './capped-log.js';
import { createFifoPipes, discardRestWithCat, drainFd, type PipeReader } from './drain-pipes.js';
import { debug } from './errors.js';
import { TASK_FILES } from './paths.js';
import { hasLiveGroupMembers, readProcStat, signalGroup } from './proc.js';
import { secretValuesFromEnv } from './secret-masker.js';
import { writeStatus } from './status-file.js';
import { sleep } from './timing.js';
import { childProcess } from './node-modules.js';
import { closeInheritedFds } from './inherited-fds.js';

/** What `start` leaves in request.json for the supervisor (the environment travels by inheritance). */
export interface TaskRequestFile {
  task_id: string;
  command: string;
  cwd: string;
  timeout_s: number;
  grace_ms: number;
  drain_ms: number;
  poll_ms: number;
}

/** Shared read buffer: reads larger than a pipe's capacity (64 KiB by default) never happen. */
const READ_BUFFER_BYTES = 256 * 1024;

/** bash like the seeds' platform, /bin/sh where bash is missing. */
export function pickShell(): string {
  for (const candidate of ['/bin/bash', '/usr/bin/bash']) if (existsSync(candidate)) return candidate;
  return '/bin/sh';
}

const nowS = () => Math.floor(Date.now() / 1000);

/** Runs one task to completion and exits the process; never returns normally. */
export async function runSupervisor(dir: string): Promise<void> {
  // Whoever started us may have leaked descriptors (selftest's caller, say); the command must not hold them.
  closeInheritedFds();
  const req = JSON.parse(readFileSync(join(dir, TASK_FILES.request), 'utf8')) as TaskRequestFile;
  const self = readProcStat(process.pid);
  const status: TaskStatus = {
    format: STATUS_FORMAT_VERSION,
    task_id: req.task_id,
    state: 'running',
    reason: null,
    supervisor: self ? { pid: process.pid, start_time: self.startTime } : null,
    group: null,
    exit_code: null,
    signal: null,
    started_at: null,
    finished_at: null,
    stdout_truncated: false,
    stderr_truncated: false,
  };

  let pgid = 0;
  let termSent = false;
  let killTimer: NodeJS.Timeout | undefined;
  // Set once the command runs; the stop paths above clear it.
  let timeoutTimer: NodeJS.Timeout | undefined = undefined;
  let isFinal = false;

  const terminateGroup = () => {
    if (termSent || !pgid) return;
    termSent = true;
    debug(`TERM to group ${pgid}`);
    signalGroup(pgid, 'SIGTERM');
    // A stopped process only acts on TERM once continued.
    signalGroup(pgid, 'SIGCONT');
    killTimer = setTimeout(() => {
      debug(`KILL to group ${pgid}`);
      signalGroup(pgid, 'SIGKILL');
    }, req.grace_ms);
  };

  const stop = (reason: TerminationReason) => {
    if (status.reason !== null || isFinal) return;
    status.reason = reason;
    clearTimeout(timeoutTimer);
    // Signals are handled between event-loop turns, and start-up spawns before its first turn.
    if (!pgid) return;
    writeStatus(dir, status);
    terminateGroup();
  };
  // `cancel` asks by SIGTERM; the others cover a supervisor stopped by hand.
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => stop('cancel'));

  const outFd = openSync(join(dir, TASK_FILES.stdout), 'w', 0o600);
  const errFd = openSync(join(dir, TASK_FILES.stderr), 'w', 0o600);
  const secrets = secretValuesFromEnv(process.env);
  const logs = [new CappedLog(outFd, LIMITS.streamCapBytes, secrets), new CappedLog(errFd, LIMITS.streamCapBytes, secrets)] as const;

  const finish = (error?: { code: string; message: string }) => {
    if (isFinal) return;
    isFinal = true;
    logs[0].end();
    logs[1].end();
    status.stdout_truncated = logs[0].isTruncated;
    status.stderr_truncated = logs[1].isTruncated;
    status.state = finalState(status.reason, status.exit_code);
    status.finished_at = nowS();
    if (error) status.error = error;
    writeStatus(dir, status);
    closeSync(outFd);
    closeSync(errFd);
    debug(`final state ${status.state}`);
    process.exit(0);
  };

  process.on('uncaughtException', (err) => {
    debug(`supervisor error: ${err.stack ?? String(err)}`);
    if (pgid) {
      signalGroup(pgid, 'SIGKILL');
    }
    if (status.reason === null) status.reason = 'supervisor_error';
    try {
      finish({ code: 'supervisor_error', message: 'the task supervisor failed; the task was stopped' });
    } catch {
      process.exit(1);
    }
  });

  let openStreams = 2;
  let onStreamsEnded: () => void = () => {};
  const streamsEnded = new Promise<void>((resolve) => (onStreamsEnded = resolve));
  const streamEnded = () => {
    if (--openStreams === 0) onStreamsEnded();
  };
  const sockets = [] as { destroy(): void }[];
  const helpers: ChildProcess[] = [];
  const { spawn } = childProcess();
  const pipes = createFifoPipes(dir, 2);
  if (!pipes) debug('no FIFOs (mkfifo missing?): draining plain child-process pipes');
  let spawned: ChildProcess;
  try {
    spawned = spawn(pickShell(), ['-c', req.command], {
      cwd: req.cwd,
      env: process.env,
      detached: true, // setsid: the command leads its own session and process group
      stdio: ['ignore', pipes ? pipes[0]!.writeFd : 'pipe', pipes ? pipes[1]!.writeFd : 'pipe'],
    });
  } catch (err) {
    status.reason = 'supervisor_error';
    finish({ code: 'spawn_failed', message: `the command could not be started (${(err as NodeJS.ErrnoException).code ?? 'error'})` });
    return;
  }
  // Only the command may hold the write ends: EOF must mean the command's side is done.
  if (pipes) for (const p of pipes) closeSync(p.writeFd);
  if (spawned.pid === undefined) {
    spawned.once('error', (err: NodeJS.ErrnoException) => {
      status.reason = 'supervisor_error';
      finish({ code: 'spawn_failed', message: `the command could not be started (${err.code ?? 'error'})` });
    });
    return;
  }
  spawned.on('error', (err) => debug(`child error: ${String(err)}`));

  // The leader cannot have been reaped yet (that needs the event loop), so /proc still has it.
  pgid = spawned.pid;
  const leader = readProcStat(pgid);
  status.group = { pgid, leader_start_time: leader?.startTime ?? 0 };
  status.started_at = nowS();
  writeStatus(dir, status);

  spawned.once('exit', (code, signal) => {
    // A failure here cannot be reported anywhere better than the status, which finish() writes.
    (async () => {
      clearTimeout(timeoutTimer);
      status.exit_code = code ?? (signal ? 128 + (osConstants.signals[signal] ?? 0) : null);
      status.signal = signal;
      if (status.reason === null) status.reason = 'exit';
      debug(`leader exited code=${String(code)} signal=${String(signal)}`);
      // Completion, failure and stops alike: nothing of the group may outlive its task.
      const giveUpAt = Date.now() + req.grace_ms + 1000;
      while (hasLiveGroupMembers(pgid) && Date.now() < giveUpAt) {
        terminateGroup();
        await sleep(req.poll_ms);
      }
      clearTimeout(killTimer);
      // The group is gone; a process that escaped it (setsid) may still hold the pipes open.
      await Promise.race([streamsEnded, sleep(req.drain_ms)]);
      for (const s of sockets) s.destroy();
      for (const h of helpers) h.kill('SIGKILL');
      finish();
    })().catch((err: unknown) => {
      debug(`exit handling failed: ${String(err)}`);
      status.reason ??= 'supervisor_error';
      finish({ code: 'supervisor_error', message: 'the supervisor failed while stopping the task' });
    });
  });

  if (pipes) {
    const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
    for (const [i, p] of pipes.entries()) {
      let reader: PipeReader | undefined = undefined;
      const handOff = () => {
        const helper = discardRestWithCat(p.readFd);
        if (!helper) return reader!.resume();
        reader!.detach();
        helpers.push(helper);
        helper.once('exit', streamEnded);
      };
      reader = drainFd(
        p.readFd,
        buffer,
        (bytes, n) => {
          logs[i]!.push(bytes, n);
          if (!logs[i]!.isTruncated) return true;
          // Full, and already losing bytes: nothing more will be written, so pass the pipe on.
          setImmediate(handOff);
          return false;
        },
        streamEnded,
      );
      sockets.push(reader);
    }
  } else {
    [spawned.stdout!, spawned.stderr!].forEach((stream, i) => {
      let ended = false;
      const end = () => {
        if (!ended) {
          ended = true;
          streamEnded();
        }
      };
      stream.on('data', (chunk: Buffer) => logs[i]!.push(chunk));
      stream.on('end', end);
      stream.on('error', end);
      stream.on('close', end);
      sockets.push(stream);
    });
  }
  timeoutTimer = setTimeout(() => stop('timeout'), req.timeout_s * 1000);
}

/** The terminal state for a termination reason; the first reason recorded wins. */
export function finalState(reason: TerminationReason | null, exitCode: number | null): TaskStatus['state'] {
  switch (reason) {
    case 'timeout':
      return 'timed_out';
    case 'cancel':
      return 'cancelled';
    case 'exit':
      return exitCode === 0 ? 'succeeded' : 'failed';
    default:
      return 'failed';
  }
}
