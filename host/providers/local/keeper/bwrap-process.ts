// bubblewrap as the keeper's direct child (bwrap --die-with-parent: if the keeper dies, so does
// the sandbox): spawned from the spec, fed the sandbox's passwd and group on pipes, and watched
// until it reports pid 1's host pid and pid 1 writes `ready` — or fails, which is classified
// from its stderr without that text ever leaving the keeper.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type { SandboxLaunch } from './launch-command.js';
import type { KeeperFailure } from './report.js';

const STDERR_KEEP_BYTES = 8192;

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

/** Feeds bwrap its passwd and group and resolves with the first of: ready, exit, spawn error, timeout. */
function watchStart(child: ChildProcess, passwd: string, group: string, startTimeoutMs: number): Promise<BwrapStart> {
  return new Promise((resolve) => {
    let stderr = '';
    let status = '';
    let ready = '';
    let pid1: number | null = null;
    let isDone = false;
    const finish = (r: BwrapStart): void => {
      if (isDone) return;
      isDone = true;
      clearTimeout(timer);
      resolve(r);
    };
    const checkReady = (): void => {
      if (pid1 !== null && ready.includes('ready')) finish({ pid1 });
    };
    const timer = setTimeout(() => finish({ failure: 'start_timeout' }), startTimeoutMs);
    child.on('error', () => finish({ failure: 'tool_missing' }));
    child.on('exit', (code) =>
      finish({ failure: classifyBwrapFailure(stderr, code), sizeUnsupported: /Unknown option --size/.test(stderr) }),
    );
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
