// A task's first process, started ahead by a warm supervisor (warm-supervisor.ts). A command's
// start is a node spawn (a fork of the supervisor, then an exec of /bin/sh) and the shell's own
// start-up: about 1.6 ms of a promotable `true`, the server's default run_command. A warm
// supervisor told what the next command's start will probably look like (its cwd, environment
// and bounds: those of the previous one) spawns that shell while nobody waits, exactly as it would
// spawn the command, and leaves it reading its stdin: a socket whose other end the resident holds
// (the warm supervisor's fd 3), and the supervisor tells the resident the shell's pid on it.
// A task whose start matches is written to it by the resident itself, right after the hand-over
// line, so the command starts while the supervisor is still reading that line and opening its
// logs (its output waits in the pipes); the shell then reconnects its stdin to /dev/null and execs
// the cold way's shell, `bash -c 'PRELUDE: ; COMMAND'`, so the command cannot tell the difference.
// Any other task gets the cold spawn, and the pending shell is killed. End of file on its stdin (the
// resident let the supervisor go, or died) makes it exit having run nothing.
import type { ChildProcess } from 'node:child_process';
import { statSync } from 'node:fs';
import type { JobBounds } from '../shared/job-bounds.js';
import type { FifoPipe } from './drain-pipes.js';
import { childProcess } from './node-modules.js';
import { readProcStat } from './proc.js';
import { spawnIds, type RunAs } from './run-as.js';

/** What a command's start looks like, as far as its first process is concerned (the command aside). */
export interface CommandShape {
  /** Absolute and existing when it was sent. */
  cwd: string;
  /** The environment the supervisor gets with its task (task variables not yet applied). */
  env: Record<string, string>;
  bounds?: JobBounds;
  /** The ids the command runs as (the protocol's run_as); absent: the supervisor's. The shell ahead is spawned with them. */
  runAs?: RunAs;
}

/** A shell started ahead for a command of `shape`, waiting for it on its stdin (the supervisor's side). */
export interface PendingShell {
  child: ChildProcess;
  shape: CommandShape;
}

/** What the resident knows of the shell its warm supervisor started ahead. */
export interface ReadyShell {
  pid: number;
  /** The shape the supervisor was told to expect. */
  shape: CommandShape;
}

/** The warm supervisor's message on the shell's stdin socket once the shell is started: `ready <pid>`. */
export const READY_PREFIX = 'ready ';

/** What the resident needs of a start to tell whether the shell started ahead can run it. */
export interface CommandStartOf {
  command: string;
  cwd: string;
  stdin?: boolean | undefined;
  bounds?: JobBounds | undefined;
  run_as?: RunAs | undefined;
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
const SHELL_VARIABLES = ['_sandbox_n', '_sandbox_c', '_sandbox_l', '_sandbox_i', '_sandbox_p'];

/**
 * Reads the command (a line count, then that many lines) from stdin, puts /dev/null in its place,
 * and execs the command's shell with the text the cold way's shell gets (its first argument, the
 * prelude, then the command). A read that fails (end of file: nobody will write a command) exits
 * having run nothing.
 */
const READ_COMMAND_THEN_EXEC =
  '_sandbox_p=$1; shift; IFS= read -r _sandbox_n || exit 125; _sandbox_c=; _sandbox_i=0; ' +
  'while [ "$_sandbox_i" -lt "$_sandbox_n" ]; do IFS= read -r _sandbox_l || exit 125; ' +
  'if [ "$_sandbox_i" = 0 ]; then _sandbox_c=$_sandbox_l; else _sandbox_c="$_sandbox_c\n$_sandbox_l"; fi; ' +
  '_sandbox_i=$((_sandbox_i + 1)); done; exec 0</dev/null; exec "$@" "$_sandbox_p$_sandbox_c"';

/**
 * Spawns the shell for a command of `shape`, its stdin `stdinFd` (the resident's socket; node
 * closes the source descriptor in the child once it is stdin, so no other copy reaches it), its
 * stdout and stderr the `outputs` pipes' write ends (the caller keeps its own until the task
 * comes); null when none could be started. `prelude` is what the cold way runs first (the bounds,
 * the OOM score), run here before the wait; `commandPrefix` what the cold way's shell gets before
 * the command (the prelude again: the command's shell then runs the same text either way), `env`
 * the environment.
 */
export function spawnPendingShell(
  shape: CommandShape,
  env: NodeJS.ProcessEnv,
  shells: Shells,
  prelude: string,
  commandPrefix: string,
  stdinFd: number,
  outputs: readonly FifoPipe[],
): PendingShell | null {
  if (SHELL_VARIABLES.some((name) => name in env)) return null;
  const args = ['-c', prelude + READ_COMMAND_THEN_EXEC, 'sandbox-task', commandPrefix, shells.command, '-c'];
  try {
    const child = childProcess().spawn(shells.first, args, {
      cwd: shape.cwd,
      env,
      detached: true, // setsid: the command leads its own session and process group
      ...spawnIds(shape.runAs),
      stdio: [stdinFd, outputs[0]!.writeFd, outputs[1]!.writeFd],
    });
    if (child.pid === undefined) {
      child.on('error', () => {});
      return null;
    }
    return { child, shape };
  } catch {
    return null;
  }
}

/**
 * The resident's side: true when the shell started ahead can run `start` (it looks as the shell
 * was started for, and the shell is still there, waiting), so that the command is written to it.
 * `env` is the one the supervisor gets with the task.
 */
export function isShellFor(shell: ReadyShell, start: CommandStartOf, env: Record<string, string>): boolean {
  return (
    start.stdin !== true &&
    !start.command.includes('\0') && // never an argument: the cold way fails to spawn it, as it should
    Buffer.byteLength(start.command) <= MAX_PENDING_COMMAND_BYTES &&
    start.cwd === shell.shape.cwd &&
    isSameBounds(start.bounds, shell.shape.bounds) &&
    // Never a shell of other ids: a user's command must not run in root's shell, nor root's in a user's.
    isSameRunAs(start.run_as, shell.shape.runAs) &&
    isSameEnv(env, shell.shape.env) &&
    isSameDirectory(start.cwd, shell.pid) &&
    isWaiting(shell.pid)
  );
}

/** What the resident writes to the shell: the command's line count, then its lines. */
export function commandLines(command: string): string {
  const lines = command.split('\n');
  return `${lines.length}\n${lines.join('\n')}\n`;
}

/** Kills the pending shell's group (it leads one, and has started nothing). */
export function discardPendingShell(pending: PendingShell): void {
  try {
    process.kill(-pending.child.pid!, 'SIGKILL');
  } catch {
    // gone already
  }
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

function isSameRunAs(a: RunAs | undefined, b: RunAs | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.uid === b.uid && a.gid === b.gid;
}

function isSameEnv(a: Record<string, string>, b: Record<string, string>): boolean {
  const names = Object.keys(a);
  return names.length === Object.keys(b).length && names.every((name) => a[name] === b[name]);
}

/**
 * Alive and not yet reaped: still waiting for its command (it reads nothing else). Its supervisor
 * reaps nothing while it waits for its task (a blocking read, no event loop): a dead shell shows as
 * a zombie until then.
 */
function isWaiting(pid: number): boolean {
  const stat = readProcStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X' && stat.state !== 'x';
}
