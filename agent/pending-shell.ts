// A task's first process, started ahead by a warm supervisor (warm-supervisor.ts). A command's
// start is a node spawn (a fork of the supervisor, then an exec of /bin/sh) and the shell's own
// start-up: about 1.6 ms of a promotable `true`, the server's default run_command. A warm
// supervisor told what the next command's start will probably look like (its cwd, environment
// and bounds: those of the previous one) spawns that shell while nobody waits, exactly as it would
// spawn the command, and leaves it reading its stdin. A task whose start matches is written to it;
// the shell then reconnects its stdin to /dev/null and execs `bash -c COMMAND` as the cold way's
// shell does, so the command cannot tell the difference. Any other task gets the cold spawn, and
// the pending shell is killed. Until then it belongs to the warm supervisor: end of file on its
// stdin (the supervisor retired or died) makes it exit having run nothing.
import type { ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import type { JobBounds } from '../shared/job-bounds.js';
import type { FifoPipe } from './drain-pipes.js';
import { childProcess } from './node-modules.js';
import { readProcStat } from './proc.js';
import type { TaskRequestFile } from './task-request.js';

/** What a command's start looks like, as far as its first process is concerned (the command aside). */
export interface CommandShape {
  /** Absolute and existing when it was sent. */
  cwd: string;
  /** The environment the supervisor gets with its task (task variables not yet applied). */
  env: Record<string, string>;
  bounds?: JobBounds;
}

/** A shell started ahead for a command of `shape`, waiting for it on its stdin. */
export interface PendingShell {
  child: ChildProcess;
  /** The environment it was started with (task variables applied). */
  env: NodeJS.ProcessEnv;
  shape: CommandShape;
}

/** The shell that becomes the command's shell (bash, else sh), and the first process's (sh). */
export interface Shells {
  first: string;
  command: string;
}

/**
 * The longest command a pending shell takes: sh's `read` takes a byte per read(2) from a pipe
 * (it must not read past a line), about 0.4 us a byte here, so a longer one costs more than the
 * start it saves. Longer commands start the cold way.
 */
const MAX_PENDING_COMMAND_BYTES = 1024;

/** The shell's own variables: an environment that has one of them starts the cold way (sh would change it). */
const SHELL_VARIABLES = ['_sandbox_n', '_sandbox_c', '_sandbox_l', '_sandbox_i'];

/**
 * Reads the command (a line count, then that many lines) from stdin, puts /dev/null in its place,
 * and execs the command's shell with it, as `exec "$@"` does in the cold way. A read that fails
 * (end of file: nobody will write a command) exits having run nothing.
 */
const READ_COMMAND_THEN_EXEC =
  'IFS= read -r _sandbox_n || exit 125; _sandbox_c=; _sandbox_i=0; ' +
  'while [ "$_sandbox_i" -lt "$_sandbox_n" ]; do IFS= read -r _sandbox_l || exit 125; ' +
  'if [ "$_sandbox_i" = 0 ]; then _sandbox_c=$_sandbox_l; else _sandbox_c="$_sandbox_c\n$_sandbox_l"; fi; ' +
  '_sandbox_i=$((_sandbox_i + 1)); done; exec 0</dev/null; exec "$@" "$_sandbox_c"';

/**
 * Spawns the shell for a command of `shape`, its stdout and stderr the `outputs` pipes' write ends
 * (the caller keeps its own until the task comes); null when none could be started.
 * `prelude` is what the cold way runs first (the bounds, the OOM score), `env` the environment.
 */
export function spawnPendingShell(
  shape: CommandShape,
  env: NodeJS.ProcessEnv,
  shells: Shells,
  prelude: string,
  outputs: readonly FifoPipe[],
): PendingShell | null {
  if (SHELL_VARIABLES.some((name) => name in env)) return null;
  try {
    const child = childProcess().spawn(shells.first, ['-c', prelude + READ_COMMAND_THEN_EXEC, 'sandbox-task', shells.command, '-c'], {
      cwd: shape.cwd,
      env,
      detached: true, // setsid: the command leads its own session and process group
      stdio: ['pipe', outputs[0]!.writeFd, outputs[1]!.writeFd],
    });
    if (child.pid === undefined) {
      child.on('error', () => {});
      return null;
    }
    child.stdin!.on('error', () => {}); // it died: the check before the hand-over sees it
    return { child, env, shape };
  } catch {
    return null;
  }
}

/**
 * The pending shell as the task's first process, the command written to it, when the task's start
 * looks as the shell was started for and the shell is still there; else null, the shell killed.
 */
export function takePendingShell(pending: PendingShell, req: TaskRequestFile, env: NodeJS.ProcessEnv): ChildProcess | null {
  const child = pending.child;
  if (!isMatch(pending, req, env) || !isWaiting(child.pid!)) {
    discardPendingShell(pending);
    return null;
  }
  const lines = req.command.split('\n');
  child.stdin!.end(`${lines.length}\n${lines.join('\n')}\n`);
  return child;
}

/** Kills the pending shell's group (it leads one, and has started nothing). */
export function discardPendingShell(pending: PendingShell): void {
  try {
    process.kill(-pending.child.pid!, 'SIGKILL');
  } catch {
    // gone already
  }
  pending.child.stdin?.destroy();
}

function isMatch(pending: PendingShell, req: TaskRequestFile, env: NodeJS.ProcessEnv): boolean {
  return (
    req.stdin !== true &&
    !req.command.includes('\0') && // never an argument: the cold way fails to spawn it, as it should
    Buffer.byteLength(req.command) <= MAX_PENDING_COMMAND_BYTES &&
    req.cwd === pending.shape.cwd &&
    isSameDirectory(req.cwd, pending.child.pid!) &&
    isSameBounds(req.bounds, pending.shape.bounds) &&
    isSameEnv(env, pending.env)
  );
}

/** The shell's working directory is still the one at `cwd` (not a directory since removed and made again). */
function isSameDirectory(cwd: string, pid: number): boolean {
  try {
    const now = statSync(cwd);
    const its = statSync(`/proc/${pid}/cwd`);
    return now.dev === its.dev && now.ino === its.ino;
  } catch {
    return false;
  }
}

function isSameBounds(a: JobBounds | undefined, b: JobBounds | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.processes === b.processes && a.openFiles === b.openFiles && a.oomScoreAdj === b.oomScoreAdj;
}

function isSameEnv(a: NodeJS.ProcessEnv, b: NodeJS.ProcessEnv): boolean {
  const names = Object.keys(a).filter((name) => a[name] !== undefined);
  return names.length === Object.keys(b).filter((name) => b[name] !== undefined).length && names.every((name) => a[name] === b[name]);
}

/** Alive and not yet reaped: still waiting for its command (it reads nothing else). */
function isWaiting(pid: number): boolean {
  const stat = readProcStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X' && stat.state !== 'x';
}
