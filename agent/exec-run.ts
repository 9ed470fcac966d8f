// The resident's `exec` op without promotion: run_command's fast path. The command runs as the
// leader of a new session and process group, already inside the sandbox's namespaces and cgroups
// (the resident's own: no cgroup move), with the environment from the request (never the
// resident's), its bounds applied first, and each stream captured head and tail within the cap.
// A timeout, or the caller giving up, kills the whole group. The resident's death takes the
// command's output pipes with it: the caller learns the outcome is unknown (only a promotable exec
// survives it: it runs under a supervisor of its own; see resident-tasks.ts).
import { constants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { jobBoundsText } from '../shared/job-bounds.js';
import { OutputCapture } from '../shared/output-capture.js';
import type { Bounds, ExecFinished } from '../shared/protocol.js';
import { AgentFailure, spawnErrorCode } from './errors.js';
import { childProcess } from './node-modules.js';
import { hasLiveGroupMembers, signalGroup } from './proc.js';
import { removeRunFile } from './remove-file.js';
import { spawnIds, type RunAs } from './run-as.js';
import { pickShell } from './supervisor.js';
import { sleep } from './timing.js';

/** One exec to run (validated; cwd checked, environment complete). */
export interface PlainExec {
  command: string;
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  maxOutputBytes: number;
  stdin: Buffer | undefined;
  bounds: Bounds | undefined;
  /** 0: SIGKILL to the group at the timeout or an abort; else TERM first and KILL this much later. */
  killGraceMs: number;
  /** Stop what the command left in its group once it exited (see the protocol's reap_group). */
  reapsGroup: boolean;
  /** The ids the command runs as (the protocol's run_as); absent: the resident's. */
  runAs?: RunAs;
  /** The protocol's `remove_file`: unlinked once the command has ended (before the answer); absent: none. */
  removeFile?: string;
}

/** After the leader exits, how long its pipes may stay open (background children): as the host's default. */
export const EXEC_DRAIN_GRACE_MS = 100;
/** After a kill, how long to wait for the leader's exit before answering anyway. */
const KILL_WAIT_MS = 5000;

/** Runs `run` to its end; `signal` aborting kills its group (the answer follows). */
export function runPlainExec(run: PlainExec, signal: AbortSignal | undefined): Promise<ExecFinished> {
  const shell = pickShell();
  const bounds = run.bounds
    ? jobBoundsText({ processes: run.bounds.processes, openFiles: run.bounds.open_files, oomScoreAdj: run.bounds.oom_score_adj })
    : '';
  return new Promise((resolve, reject) => {
    const child = childProcess().spawn(shell, ['-c', `${bounds}eval "set --; $1"`, shell, run.command], {
      cwd: run.cwd,
      env: run.env,
      detached: true,
      ...spawnIds(run.runAs),
      stdio: [run.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
    const out = new OutputCapture(run.maxOutputBytes);
    const err = new OutputCapture(run.maxOutputBytes);
    const timers: NodeJS.Timeout[] = [];
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let isTimedOut = false;
    let isKilling = false;
    let isSettled = false;
    const settle = (): void => {
      if (isSettled) return;
      isSettled = true;
      for (const t of timers) clearTimeout(t);
      signal?.removeEventListener('abort', kill);
      for (const s of [child.stdout, child.stderr]) s?.destroy();
      // The command has ended (or was killed and given up on): run_code's program goes before the answer.
      removeRunFile(run.removeFile);
      const code = exit?.code ?? null;
      const sig = exit?.signal ?? null;
      resolve({
        kind: 'finished',
        exit_code: code !== null ? code : sig ? 128 + (constants.signals[sig] ?? 0) : null,
        timed_out: isTimedOut,
        stdout_b64: out.data.toString('base64'),
        stderr_b64: err.data.toString('base64'),
        stdout_truncated: out.isTruncated,
        stderr_truncated: err.isTruncated,
        stdout_head_bytes: out.splitAt,
        stderr_head_bytes: err.splitAt,
      });
    };
    const signalGroup = (sigs: readonly NodeJS.Signals[]): void => {
      for (const sig of sigs) {
        try {
          process.kill(-child.pid!, sig);
        } catch {
          // gone
        }
      }
    };
    // Once the leader is reaped its group id may be reused: after its exit only the drain grace remains.
    function kill(): void {
      if (exit || isKilling || child.pid === undefined) return;
      isKilling = true;
      if (run.killGraceMs > 0) {
        signalGroup(['SIGTERM', 'SIGCONT']);
        timers.push(setTimeout(() => exit || signalGroup(['SIGKILL', 'SIGCONT']), run.killGraceMs));
      } else signalGroup(['SIGKILL', 'SIGCONT']);
      timers.push(setTimeout(settle, run.killGraceMs + KILL_WAIT_MS));
    }
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (isSettled) return;
      isSettled = true;
      for (const t of timers) clearTimeout(t);
      signal?.removeEventListener('abort', kill);
      reject(new AgentFailure(spawnErrorCode(e.code), `the command could not be started (${e.code ?? 'error'})`));
    });
    (child.stdout as Readable).on('data', (b: Buffer) => out.push(b));
    (child.stderr as Readable).on('data', (b: Buffer) => err.push(b));
    for (const s of [child.stdout, child.stderr]) s?.on('error', () => {});
    if (run.stdin && child.stdin) {
      (child.stdin as Writable).on('error', () => {});
      child.stdin.end(run.stdin);
    }
    child.on('exit', (code, sig) => {
      exit = { code, signal: sig };
      if (run.reapsGroup && child.pid !== undefined) {
        // The group's number stays taken while any member lives, so signalling it stays safe until it is empty.
        reapGroup(child.pid, run.killGraceMs)
          .catch(() => undefined)
          .then(() => timers.push(setTimeout(settle, EXEC_DRAIN_GRACE_MS)))
          .catch(() => settle());
        return;
      }
      timers.push(setTimeout(settle, EXEC_DRAIN_GRACE_MS));
    });
    child.on('close', () => (run.reapsGroup ? undefined : settle()));
    timers.push(
      setTimeout(() => {
        if (exit || isKilling) return;
        isTimedOut = true;
        kill();
      }, run.timeoutMs),
    );
    if (signal?.aborted) kill();
    else signal?.addEventListener('abort', kill, { once: true });
  });
}

/** TERM to what is left of group `pgid`, KILL after `graceMs` (or at once without one); resolves once it is empty (bounded). */
async function reapGroup(pgid: number, graceMs: number): Promise<void> {
  if (!hasLiveGroupMembers(pgid)) return;
  signalGroup(pgid, graceMs > 0 ? 'SIGTERM' : 'SIGKILL');
  signalGroup(pgid, 'SIGCONT');
  const killAt = Date.now() + graceMs;
  const giveUpAt = killAt + 1000;
  while (hasLiveGroupMembers(pgid) && Date.now() < giveUpAt) {
    if (Date.now() >= killAt) signalGroup(pgid, 'SIGKILL');
    await sleep(10);
  }
}
