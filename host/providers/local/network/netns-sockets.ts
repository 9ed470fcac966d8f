// The keeper's way to sockets inside its sandbox's network namespace: it starts the netns helper
// (netns-helper.ts) there on demand, asks it for a listening socket or a connection, and receives
// the socket itself. A helper idle for a while is stopped (each one is a node process); the next
// request starts another, as does a request after a helper died. Near the user's process limit
// no helper is started without room for node's first threads (system/user-processes.ts): the
// request fails at once with EAGAIN instead of waiting out its timeout for a helper that hangs.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Server, Socket } from 'node:net';
import { NETNS_HELPER_ARG, type NetnsReply, type NetnsRequest } from './netns-helper.js';
import { noInspectorSignalFlags } from '../../../util/inspector-signal.js';
import { isOutOfProcesses, NETNS_HELPER_START_TASKS, shortOfProcesses } from '../system/user-processes.js';

/** How to reach the namespace and how long a helper may idle. */
export interface NetnsSocketsOpts {
  /** Host pid of the sandbox's pid 1, whose network namespace is entered. */
  pid1: number;
  nsenter: string;
  /** Enter the sandbox's user namespace first: needed when not root (the namespace's owner may then enter). */
  enterUserNs: boolean;
  /** The node binary and the keeper's script, which runs as the helper with NETNS_HELPER_ARG. */
  nodePath: string;
  keeperScript: string;
  /** Stop a helper with nothing to do after this long (default 30 s). */
  idleMs?: number;
  /** Give up on one request after this long (default 10 s). */
  requestTimeoutMs?: number;
}

/**
 * A request the helper could not carry out; `code` is an errno name (ECONNREFUSED…; EAGAIN or
 * ENOMEM: no helper could be started for want of processes or memory) or `helper_failed`.
 */
export class NetnsError extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/** A SIGKILLed helper is reaped within milliseconds; this only bounds a wait that cannot be. */
const HELPER_EXIT_WAIT_MS = 5000;

interface Pending {
  resolve(handle: unknown): void;
  reject(e: NetnsError): void;
  timer: NodeJS.Timeout;
}

/** Sockets in one sandbox's network namespace, made by its helper process. */
export class NetnsSockets {
  private helper: ChildProcess | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private idleTimer: NodeJS.Timeout | undefined;
  private isClosed = false;

  constructor(private readonly opts: NetnsSocketsOpts) {}

  /** A socket listening on the sandbox's 127.0.0.1:`port`, served from this process. */
  async listen(port: number): Promise<Server> {
    return (await this.request('listen', port)) as Server;
  }

  /** A connection to the sandbox's loopback at `port` (127.0.0.1, else ::1). */
  async connect(port: number): Promise<Socket> {
    return (await this.request('connect', port)) as Socket;
  }

  /**
   * Stops the helper; later requests fail. Resolves once the helper has exited (or after
   * HELPER_EXIT_WAIT_MS): until then it still sits in the sandbox's network namespace, so a kill
   * that returned earlier would leave a process of the sandbox behind for a moment. Never rejects.
   */
  close(): Promise<void> {
    this.isClosed = true;
    return this.stopHelper();
  }

  private request(op: NetnsRequest['op'], port: number): Promise<unknown> {
    if (this.isClosed) return Promise.reject(new NetnsError('closed'));
    clearTimeout(this.idleTimer);
    // Short of its first threads node would hang before any of its code ran, unseen until the timeout.
    if (!this.helper && shortOfProcesses(NETNS_HELPER_START_TASKS)) return Promise.reject(new NetnsError('EAGAIN'));
    const helper = this.helper ?? this.startHelper();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.settle(id, new NetnsError('timeout')), this.opts.requestTimeoutMs ?? 10_000);
      this.pending.set(id, { resolve, reject, timer });
      helper.send({ id, op, port } satisfies NetnsRequest, (e) => {
        if (e) this.settle(id, new NetnsError('helper_failed'));
      });
    });
  }

  private settle(id: number, outcome: NetnsError | { handle: unknown }): void {
    const p = this.pending.get(id);
    if (!p) {
      // A socket that arrived after its request gave up.
      if (!(outcome instanceof NetnsError)) {
        const late = outcome.handle as { destroy?(): void; close?(): void } | undefined;
        if (late?.destroy) late.destroy();
        else late?.close?.();
      }
      return;
    }
    this.pending.delete(id);
    clearTimeout(p.timer);
    if (outcome instanceof NetnsError) p.reject(outcome);
    else p.resolve(outcome.handle);
    if (this.pending.size === 0 && this.helper) {
      this.idleTimer = setTimeout(() => void this.stopHelper().catch(() => undefined), this.opts.idleMs ?? 30_000);
      this.idleTimer.unref();
    }
  }

  private startHelper(): ChildProcess {
    const { pid1, nsenter, enterUserNs, nodePath, keeperScript } = this.opts;
    const namespaces = enterUserNs ? ['--preserve-credentials', '-U', '-n'] : ['-n'];
    // One platform worker on any machine (0 meant one per core but one): the helper's start needs
    // NETNS_HELPER_START_TASKS processes and threads everywhere.
    // prettier-ignore
    const child = spawn(nsenter, [
      '-t', String(pid1), ...namespaces, '--',
      nodePath, '--max-old-space-size=16', '--max-semi-space-size=1', '--v8-pool-size=1', ...noInspectorSignalFlags(nodePath),
      keeperScript, NETNS_HELPER_ARG,
    ], {
      cwd: '/',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
    });
    this.helper = child;
    child.on('message', (m: NetnsReply, handle: unknown) => {
      if (typeof m !== 'object' || m === null || typeof m.id !== 'number') return;
      this.settle(m.id, m.ok ? { handle } : new NetnsError(typeof m.code === 'string' ? m.code : 'helper_failed'));
    });
    // A spawn refused for want of processes or memory says so (EAGAIN, ENOMEM): the keeper tells it apart.
    child.on('error', (e: NodeJS.ErrnoException) => this.onHelperGone(child, isOutOfProcesses(e.code) ? e.code : undefined));
    child.on('exit', () => this.onHelperGone(child));
    return child;
  }

  /** Fails what the gone helper still owed; the next request starts a new one. */
  private onHelperGone(child: ChildProcess, code = 'helper_failed'): void {
    if (this.helper !== child) return;
    this.helper = null;
    clearTimeout(this.idleTimer);
    for (const id of [...this.pending.keys()]) this.settle(id, new NetnsError(code));
  }

  private stopHelper(): Promise<void> {
    clearTimeout(this.idleTimer);
    const helper = this.helper;
    if (!helper) return Promise.resolve();
    this.helper = null;
    for (const id of [...this.pending.keys()]) this.settle(id, new NetnsError('helper_failed'));
    const exited =
      helper.exitCode !== null || helper.signalCode !== null
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            helper.once('exit', () => resolve());
            setTimeout(resolve, HELPER_EXIT_WAIT_MS).unref();
          });
    helper.kill('SIGKILL');
    return exited;
  }
}
