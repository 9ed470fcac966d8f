// bubblewrap as the keeper's direct child (bwrap --die-with-parent: if the keeper dies, so does
// the sandbox): spawned from the spec, fed the sandbox's passwd and group on pipes, and watched
// until it reports pid 1's host pid and pid 1 writes `ready` — or fails, which is classified
// from its stderr without that text ever leaving the keeper.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { createLogger, isDebugOn } from '../../../util/log.js';
import { isOutOfProcesses } from '../system/user-processes.js';
import type { SandboxLaunch } from './launch-command.js';
import type { KeeperFailure } from './report.js';

const STDERR_KEEP_BYTES = 8192;

/**
 * How long a failure waits, after bwrap's exit, for the rest of its stderr: Node may report the
 * exit before it has read the pipes, and a failure classified on half its text is misnamed.
 */
const STDERR_DRAIN_MS = 1_000;

/** A start failure for want of processes or memory: fork, clone or a mount refused with EAGAIN or ENOMEM. */
const OUT_OF_RESOURCES = /Resource temporarily unavailable|Cannot allocate memory/;

/** The errno names a failure's stderr may end in (strerror's texts), for the debug log. */
const ERRNO_TEXTS: Readonly<Record<string, string>> = {
  'Resource temporarily unavailable': 'EAGAIN',
  'Cannot allocate memory': 'ENOMEM',
  'No space left on device': 'ENOSPC',
  'No such file or directory': 'ENOENT',
  'Permission denied': 'EACCES',
  'Operation not permitted': 'EPERM',
  'Device or resource busy': 'EBUSY',
  'Invalid argument': 'EINVAL',
};
/**
 * How a launch ended: pid 1 runs and is ready (its host pid), or bwrap failed to get there
 * (`sizeUnsupported`: this bubblewrap predates --size, 0.7.0).
 */
export type BwrapStart = { pid1: number } | { failure: KeeperFailure; sizeUnsupported?: boolean };

/** The bwrap child of a keeper. */
export interface BwrapProcess {
  readonly child: ChildProcess;
  /** Settles once: pid 1 is ready, bwrap exited or failed to spawn, or `startTimeoutMs` passed. */
  readonly started: Promise<BwrapStart>;
  /** Resolves when bwrap has exited (at once if it already has); never rejects. */
  readonly exited: Promise<void>;
  /** True once bwrap has exited. */
  hasExited(): boolean;
}

/** Classifies bwrap's (or its launch helper's) start-up failure from its stderr; the text itself never leaves the keeper. */
export function classifyBwrapFailure(stderr: string, exitCode: number | null): KeeperFailure {
  if (exitCode === 125) return 'cgroup_unavailable';
  // Before the namespace patterns: "Creating new namespace failed: Resource temporarily unavailable"
  // is the user's process limit (or memory), not a kernel refusing namespaces.
  if (OUT_OF_RESOURCES.test(stderr)) return 'start_out_of_resources';
  if (/setting up uid map: Permission denied/i.test(stderr)) return 'userns_apparmor';
  // The launch helper of a template sandbox (helpers/mount-root.pl) names the call that failed.
  if (/^sandbox-mcp: (mount|open_tree|mount_setattr|move_mount)\b/m.test(stderr)) return 'root_mount_failed';
  if (/new namespace|user namespace|No space left on device|unshare|setgroups|uid map/i.test(stderr)) return 'userns_refused';
  if (/No such file or directory/.test(stderr) && /execvp|exec /i.test(stderr)) return 'tool_missing';
  return 'bwrap_failed';
}

/**
 * Spawns the sandbox's launch command (keeper/launch-command.ts) and starts watching it get ready.
 * bwrap and pid 1 stay outside the sandbox's cgroups, which every command joins as it enters: so
 * the memory cgroup's OOM killer can never choose them, and a start pays no cgroup migration
 * (about one RCU grace period each).
 */
export function spawnBwrap(launch: SandboxLaunch, startTimeoutMs: number): BwrapProcess {
  const { command } = launch;
  const child = spawn(command.file, command.args, {
    cwd: '/',
    env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
  });
  const hasExited = (): boolean => child.exitCode !== null || child.signalCode !== null;
  const exited = new Promise<void>((resolve) => {
    if (hasExited()) resolve();
    else child.once('exit', () => resolve());
  });
  const started = watchStart(child, launch.passwd, launch.group, startTimeoutMs);
  return { child, started, exited, hasExited };
}

/** What the debug log says of a failed start: static fields only, never bwrap's text (it names host paths). */
function logStartFailure(
  failure: KeeperFailure,
  exitCode: number | null,
  signal: NodeJS.Signals | null,
  stderr: string,
  ready: boolean,
  spawnErrno?: string,
): void {
  const errno = spawnErrno ?? Object.entries(ERRNO_TEXTS).find(([text]) => stderr.includes(text))?.[1];
  createLogger({ isDebug: isDebugOn(process.env) }).debug('bwrap failed to start the sandbox', {
    failure,
    exitCode: exitCode ?? undefined,
    signal: signal ?? undefined,
    errno,
    stderrBytes: stderr.length,
    ready,
  });
}

/** The failure of a spawn error: the system out of processes or memory, else the program missing. */
function spawnFailure(err: NodeJS.ErrnoException): KeeperFailure {
  return isOutOfProcesses(err.code) ? 'start_out_of_resources' : 'tool_missing';
}

/** Feeds bwrap its passwd and group and resolves with the first of: ready, exit, spawn error, timeout. */
function watchStart(child: ChildProcess, passwd: string, group: string, startTimeoutMs: number): Promise<BwrapStart> {
  return new Promise((resolve) => {
    let stderr = '';
    let status = '';
    let ready = '';
    let pid1: number | null = null;
    let isDone = false;
    let exitStatus: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    const finish = (r: BwrapStart): void => {
      if (isDone) return;
      isDone = true;
      clearTimeout(timer);
      resolve(r);
    };
    const checkReady = (): void => {
      // A ready read after bwrap's exit is a sandbox already gone (pid 1 died at once): a failure.
      if (pid1 !== null && ready.includes('ready') && !exitStatus) finish({ pid1 });
    };
    const timer = setTimeout(() => finish({ failure: 'start_timeout' }), startTimeoutMs);
    child.on('error', (err: NodeJS.ErrnoException) => {
      const failure = spawnFailure(err);
      logStartFailure(failure, null, null, '', false, err.code);
      finish({ failure });
    });
    // A failure is classified once bwrap's stderr is read to its end ('close': every pipe closed),
    // or a moment after its exit (something it started may hold a pipe).
    const classify = (): void => {
      if (isDone || !exitStatus) return;
      const { code, signal } = exitStatus;
      const failure = classifyBwrapFailure(stderr, code);
      logStartFailure(failure, code, signal, stderr, ready.includes('ready'));
      finish({ failure, sizeUnsupported: /Unknown option --size/.test(stderr) });
    };
    child.on('exit', (code, signal) => {
      exitStatus = { code, signal };
      if (!isDone) setTimeout(classify, STDERR_DRAIN_MS).unref();
    });
    child.on('close', classify);
    const [, , err, statusPipe, readyPipe, passwdPipe, groupPipe] = child.stdio as unknown as [
      unknown,
      unknown,
      Readable | null,
      Readable | null,
      Readable | null,
      Writable | null,
      Writable | null,
    ];
    err?.on('data', (b: Buffer) => {
      if (stderr.length < STDERR_KEEP_BYTES) stderr += b.toString('utf8');
    });
    statusPipe?.on('data', (b: Buffer) => {
      if (pid1 !== null) return;
      status += b.toString('utf8');
      const m = /"child-pid":\s*(\d+)/.exec(status);
      if (m) {
        pid1 = Number(m[1]);
        checkReady();
      }
    });
    readyPipe?.on('data', (b: Buffer) => {
      ready += b.toString('utf8');
      checkReady();
    });
    for (const [pipe, text] of [
      [passwdPipe, passwd],
      [groupPipe, group],
    ] as const) {
      pipe?.on('error', () => {});
      pipe?.end(text);
    }
    for (const p of [err, statusPipe, readyPipe]) p?.on('error', () => {});
  });
}
