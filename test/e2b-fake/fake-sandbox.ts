// One fake E2B sandbox: a temp directory whose `home/user` plays /home/user, real processes
// started there with HOME pointing at it, and a deadline (end_at) that kills everything the
// sandbox started and removes its directory — the lifetime semantics the tests rely on.
import { randomBytes } from 'node:crypto';
import { cpSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import type { IPty } from '@lydell/node-pty';
import { scratchDir } from '../support/scratch.js';

/** Sandbox paths under this prefix live in the sandbox's own HOME directory. */
export const SANDBOX_HOME = '/home/user';
/** Every process of a fake sandbox carries this variable, so kill finds escaped descendants too. */
export const SANDBOX_MARKER_VAR = 'FAKE_E2B_SANDBOX_ID';

export interface FakeSandboxOpts {
  templateId: string;
  timeoutS: number;
  envs: Record<string, string>;
  metadata: Record<string, string>;
  envdVersion: string;
  onExpire: (sb: FakeSandbox) => void;
  /** The create's egress settings, kept as sent (the fake does not enforce them: it has no network of its own). */
  allowInternetAccess?: boolean;
  network?: FakeNetworkConfig;
  /** A snapshot's saved home directory the sandbox starts with (a copy). */
  homeFrom?: string;
}

/** The egress part of E2B's SandboxNetworkConfig. */
export interface FakeNetworkConfig {
  allowOut?: string[];
  denyOut?: string[];
}

/** The totals a fake sandbox's metrics report (its detail's memoryMB and diskSizeMB). */
export const FAKE_MEMORY_BYTES = 512 * 1024 * 1024;
export const FAKE_DISK_BYTES = 10240 * 1024 * 1024;

/** A fake sandbox and its lifetime. */
export class FakeSandbox {
  readonly id = `fake${randomBytes(8).toString('hex')}`;
  readonly accessToken = randomBytes(16).toString('hex');
  readonly root: string;
  readonly home: string;
  readonly templateId: string;
  readonly envs: Record<string, string>;
  readonly metadata: Record<string, string>;
  readonly envdVersion: string;
  readonly allowInternetAccess: boolean | null;
  readonly network: FakeNetworkConfig | null;
  readonly startedAt = new Date();
  endAt: Date;
  state: 'running' | 'paused' = 'running';
  readonly processes = new Map<number, ChildProcess>();
  /** Processes started on a pseudo-terminal (Start with `pty`), by pid. */
  readonly terminals = new Map<number, IPty>();
  private timer: NodeJS.Timeout | undefined;
  private readonly onExpire: (sb: FakeSandbox) => void;
  killed = false;

  constructor(opts: FakeSandboxOpts) {
    this.root = scratchDir('fake-e2b-');
    this.home = path.join(this.root, 'home', 'user');
    mkdirSync(this.home, { recursive: true });
    if (opts.homeFrom) cpSync(opts.homeFrom, this.home, { recursive: true, verbatimSymlinks: true });
    this.templateId = opts.templateId;
    this.envs = opts.envs;
    this.metadata = opts.metadata;
    this.envdVersion = opts.envdVersion;
    this.allowInternetAccess = opts.allowInternetAccess ?? null;
    this.network = opts.network ?? null;
    this.onExpire = opts.onExpire;
    this.endAt = new Date();
    this.setTimeoutS(opts.timeoutS);
  }

  /** Sets the lifetime to `timeoutS` from now (the /timeout semantics). */
  setTimeoutS(timeoutS: number): void {
    this.endAt = new Date(Date.now() + timeoutS * 1000);
    this.arm();
  }

  /** Remaining lifetime in ms (never negative). */
  remainingMs(): number {
    return Math.max(0, this.endAt.getTime() - Date.now());
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onExpire(this), this.remainingMs());
    this.timer.unref();
  }

  /** Maps a sandbox path to the host path: /home/user and relative paths go into the sandbox home. */
  hostPath(p: string): string {
    if (!p.startsWith('/')) return path.join(this.home, p);
    if (p === SANDBOX_HOME || p.startsWith(SANDBOX_HOME + '/')) return path.join(this.home, p.slice(SANDBOX_HOME.length));
    return p;
  }

  /** Maps a host path back to what the sandbox would call it. */
  sandboxPath(hostP: string): string {
    if (hostP === this.home || hostP.startsWith(this.home + '/')) return SANDBOX_HOME + hostP.slice(this.home.length);
    return hostP;
  }

  /** The environment every process of this sandbox starts with (no host secrets or CA settings). */
  processEnv(extra: Record<string, string> = {}): Record<string, string> {
    return {
      PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
      LANG: 'C.UTF-8',
      USER: 'user',
      ...this.envs,
      ...extra,
      HOME: this.home,
      [SANDBOX_MARKER_VAR]: this.id,
    };
  }

  /**
   * One SandboxMetric sample, measured now: memUsed is the resident memory of the sandbox's
   * processes, diskUsed the bytes of the files under its root.
   */
  metric(nowS: number): Record<string, unknown> {
    let memUsed = 0;
    for (const pid of this.markedPids()) {
      try {
        memUsed += Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]) * 4096;
      } catch {
        // exited meanwhile
      }
    }
    return {
      timestamp: new Date(nowS * 1000).toISOString(),
      timestampUnix: nowS,
      cpuCount: 2,
      cpuUsedPct: 0,
      memUsed,
      memTotal: FAKE_MEMORY_BYTES,
      memCache: 0,
      diskUsed: bytesUnder(this.root),
      diskTotal: FAKE_DISK_BYTES,
    };
  }

  /** Kills every process carrying this sandbox's marker (setsid'd ones too) and removes its files. */
  destroy(): void {
    if (this.killed) return;
    this.killed = true;
    if (this.timer) clearTimeout(this.timer);
    for (const pid of this.markedPids()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const child of this.processes.values()) child.kill('SIGKILL');
    for (const t of this.terminals.values()) t.kill('SIGKILL');
    // A process killed a moment ago may still be writing: retry once it is surely gone.
    try {
      rmSync(this.root, { recursive: true, force: true });
    } catch {
      setTimeout(() => rmSync(this.root, { recursive: true, force: true, maxRetries: 3 }), 200).unref();
    }
  }

  private markedPids(): number[] {
    const needle = `${SANDBOX_MARKER_VAR}=${this.id}`;
    const pids: number[] = [];
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      try {
        const env = readFileSync(`/proc/${name}/environ`, 'latin1');
        if (env.split('\0').includes(needle)) pids.push(Number(name));
      } catch {
        // exited meanwhile, or not readable
      }
    }
    return pids;
  }
}

/** Bytes of the regular files under `dir` (0 once it is gone). */
function bytesUnder(dir: string): number {
  let total = 0;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return 0;
  }
  for (const name of names) {
    const p = path.join(dir, name);
    try {
      const st = lstatSync(p);
      if (st.isDirectory()) total += bytesUnder(p);
      else if (st.isFile()) total += st.size;
    } catch {
      // removed meanwhile
    }
  }
  return total;
}
