// The keeper: one detached host process per sandbox, started as `node dist/keeper.js <dir>`.
// It runs bubblewrap as its direct child (bwrap --die-with-parent: if the keeper dies, so does
// the sandbox), reports readiness on fd 3, and owns the deadline: at end_at — whether or not any
// server is running — it SIGKILLs the sandbox's pid 1 (which takes everything inside with it),
// removes the cgroups and the state directory, and exits. SIGTERM means "now" (kill_sandbox);
// SIGUSR1 means "the deadline file changed" (set_sandbox_timeout).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { buildBwrapArgs } from '../launch/bwrap-args.js';
import { buildLaunchCommand } from '../launch/command-lines.js';
import { groupFile, passwdFile } from '../launch/passwd.js';
import type { KeeperFailure, KeeperReport } from './report.js';
import { CgroupUnavailableError, createCgroups, removeCgroups } from '../system/cgroups.js';
import { identify, killNamespaceEnterers, pidNamespace, signalIfAlive, type ProcIdentity } from '../system/proc.js';
import { KEEPER_FILE, readDeadline, readSpec, removeSandboxDir, writePrivateFile, type KeeperRecord } from '../sandbox/state-dir.js';
import { specNetwork } from '../sandbox/spec.js';

/** Timings and the report descriptor of runKeeper; every one has a working default. */
export interface KeeperOpts {
  /** Descriptor of the readiness pipe from the provider. */
  reportFd?: number;
  /** How long bwrap may take to report a ready pid 1. */
  startTimeoutMs?: number;
  /** Re-read the deadline file at least this often (covers a lost SIGUSR1 or removed state). */
  recheckMs?: number;
  /** How long to wait for bwrap to exit after its pid 1 was killed. */
  exitWaitMs?: number;
}

const STDERR_KEEP_BYTES = 8192;

/** Classifies bwrap's start-up failure from its stderr; the text itself never leaves the keeper. */
export function classifyBwrapFailure(stderr: string, exitCode: number | null): KeeperFailure {
  if (exitCode === 125) return 'cgroup_unavailable';
  if (/setting up uid map: Permission denied/i.test(stderr)) return 'userns_apparmor';
  if (/new namespace|user namespace|No space left on device|unshare|setgroups|uid map/i.test(stderr)) return 'userns_refused';
  if (/No such file or directory/.test(stderr) && /execvp|exec /i.test(stderr)) return 'tool_missing';
  return 'bwrap_failed';
}

/** Entry point of the keeper (`<sandbox dir>` as the only argument); resolves only when the sandbox is gone. */
export async function runKeeper(args: string[], opts: KeeperOpts = {}): Promise<void> {
  const reportFd = opts.reportFd ?? 3;
  const startTimeoutMs = opts.startTimeoutMs ?? 15_000;
  const recheckMs = opts.recheckMs ?? 30_000;
  const exitWaitMs = opts.exitWaitMs ?? 5_000;
  const dir = args[0];
  let reported = false;
  const report = (msg: KeeperReport): void => {
    if (reported) return;
    reported = true;
    try {
      writeSync(reportFd, JSON.stringify(msg) + '\n');
      closeSync(reportFd);
    } catch {
      // The provider gave up waiting; the sandbox still lives until its deadline.
    }
  };
  // A detached keeper has no terminal; these must never end it by accident.
  process.on('SIGHUP', () => {});
  process.on('SIGINT', () => {});

  const spec = dir ? readSpec(dir) : null;
  if (!dir || !spec) {
    report({ ok: false, code: 'spec_invalid' });
    return;
  }
  const sandboxes = dirname(dir);
  const id = basename(dir);
  const removeState = (): void => {
    removeSandboxDir(sandboxes, id);
  };

  let cgroups: string[];
  try {
    cgroups = createCgroups(
      `sandbox-mcp-${spec.id}`,
      {
        ...(spec.cpu !== null ? { cpu: spec.cpu } : {}),
        ...(spec.memoryMb !== null ? { memoryMb: spec.memoryMb } : {}),
      },
      spec.identity.dropPrivileges ? spec.identity : undefined,
    );
  } catch (e) {
    report({ ok: false, code: e instanceof CgroupUnavailableError ? e.code : 'cgroup_unavailable' });
    removeState();
    return;
  }

  const bwrapArgs = buildBwrapArgs({
    statusFd: 3,
    readyFd: 4,
    passwdFd: 5,
    groupFd: 6,
    shell: spec.shell,
    hidePaths: spec.hidePaths,
    roBindPaths: spec.roBindPaths,
    hideVarRun: spec.hideVarRun,
    network: specNetwork(spec),
  });
  const cmd = buildLaunchCommand(
    bwrapArgs,
    spec.identity,
    spec.tools,
    cgroups.map((d) => join(d, 'cgroup.procs')),
  );
  const passwd = passwdFile(spec.identity, spec.shell);
  const group = groupFile(spec.identity);

  let child: ChildProcess;
  const started = await new Promise<{ pid1: number } | { failure: KeeperFailure }>((resolve) => {
    child = spawn(cmd.file, cmd.args, {
      cwd: '/',
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
      stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    let stderr = '';
    let status = '';
    let ready = '';
    let pid1: number | null = null;
    let done = false;
    const finish = (r: { pid1: number } | { failure: KeeperFailure }): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const check = (): void => {
      if (pid1 !== null && ready.includes('ready')) finish({ pid1 });
    };
    const timer = setTimeout(() => finish({ failure: 'start_timeout' }), startTimeoutMs);
    child.on('error', () => finish({ failure: 'tool_missing' }));
    child.on('exit', (code) => finish({ failure: classifyBwrapFailure(stderr, code) }));
    const stdio = child.stdio as unknown as (Readable | Writable | null | undefined)[];
    const [, , err, statusPipe, readyPipe, passwdPipe, groupPipe] = stdio as [
      unknown,
      unknown,
      Readable,
      Readable,
      Readable,
      Writable,
      Writable,
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
        check();
      }
    });
    readyPipe?.on('data', (b: Buffer) => {
      ready += b.toString('utf8');
      check();
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

  const bwrapChild = child!;
  const exited = new Promise<void>((resolve) => {
    if (bwrapChild.exitCode !== null || bwrapChild.signalCode !== null) resolve();
    else bwrapChild.once('exit', () => resolve());
  });

  let pidNs: string | null = null;
  let hasExited = false;
  bwrapChild.once('exit', () => (hasExited = true));
  if (bwrapChild.exitCode !== null || bwrapChild.signalCode !== null) hasExited = true;
  const stopSandbox = async (pid1: ProcIdentity | null, bwrapId: ProcIdentity | null): Promise<void> => {
    if (pid1) signalIfAlive(pid1, 'SIGKILL');
    if (bwrapId) signalIfAlive(bwrapId, 'SIGKILL');
    else if (bwrapChild.exitCode === null && bwrapChild.signalCode === null) bwrapChild.kill('SIGKILL');
    // Commands entered with nsenter keep a host-side half that must reap its child before the
    // namespace can finish dying; a stopped one never would.
    const deadline = Date.now() + exitWaitMs;
    while (!hasExited && Date.now() < deadline) {
      if (pidNs) killNamespaceEnterers(pidNs, [process.pid]);
      await Promise.race([exited, new Promise((r) => setTimeout(r, 50).unref())]);
    }
    await removeCgroups(cgroups);
  };

  if ('failure' in started) {
    await stopSandbox(null, null);
    report({ ok: false, code: started.failure });
    removeState();
    return;
  }

  const self = identify(process.pid);
  const bwrapId = bwrapChild.pid !== undefined ? identify(bwrapChild.pid) : null;
  const pid1 = identify(started.pid1);
  pidNs = pidNamespace(started.pid1);
  if (!self || !bwrapId || !pid1) {
    await stopSandbox(pid1, bwrapId);
    report({ ok: false, code: 'bwrap_failed' });
    removeState();
    return;
  }
  const record: KeeperRecord = { version: 1, keeper: self, bwrap: bwrapId, pid1, cgroups };
  writePrivateFile(join(dir, KEEPER_FILE), JSON.stringify(record) + '\n');

  let terminating: Promise<void> | null = null;
  // Started from signal handlers and timers too; every caller shares this one promise, whose
  // failure the final `await terminate()` below reports, so the early starts drop theirs.
  const startTerminate = (): void => {
    terminate().catch(() => undefined);
  };
  let timer: NodeJS.Timeout | undefined;
  const terminate = (): Promise<void> =>
    (terminating ??= (async () => {
      if (timer) clearTimeout(timer);
      await stopSandbox(pid1, bwrapId);
      removeState();
      for (const s of bwrapChild.stdio) s?.destroy();
    })());
  const schedule = (): void => {
    if (terminating) return;
    if (timer) clearTimeout(timer);
    const endAtMs = readDeadline(dir);
    // No deadline file means someone removed the state: the sandbox must not outlive it.
    if (endAtMs === null || endAtMs <= Date.now()) {
      startTerminate();
      return;
    }
    timer = setTimeout(schedule, Math.min(endAtMs - Date.now(), recheckMs));
  };
  const onTerm = startTerminate;
  process.on('SIGTERM', onTerm);
  process.on('SIGUSR1', schedule);
  // pid 1 died some other way (killed from the host): clean up just the same.
  bwrapChild.once('exit', startTerminate);
  if (hasExited) startTerminate();
  schedule();
  report({ ok: true });
  await exited;
  await terminate();
  process.off('SIGTERM', onTerm);
  process.off('SIGUSR1', schedule);
}
