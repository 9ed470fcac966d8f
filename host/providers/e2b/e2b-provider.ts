// The e2b provider: E2B's cloud behind the Provider interface, on the `e2b` SDK. Lifecycle calls
// use the SDK's static control-plane methods (no connect). exec and files reach envd through a
// Sandbox object obtained at create, or by a connect that asks for no more than the remaining
// lifetime — E2B's connect only ever lengthens a running sandbox's TTL, so asking for what is
// left changes nothing. Only setTimeout changes a lifetime.
import { randomBytes } from 'node:crypto';
import { CommandExitError, Sandbox, type CommandHandle } from 'e2b';
import { ProviderError } from '../../errors.js';
import { OutputCapture } from '../output-capture.js';
import {
  cancelledBeforeStart,
  DEFAULT_EXEC_OUTPUT_CAP_BYTES,
  resolveSandboxPath,
  SANDBOX_HOME,
  type CreateOpts,
  type ExecOpts,
  type ExecResult,
  type FileEntry,
  type ListFilesOpts,
  type ListOpts,
  type Provider,
  type ReadFileOpts,
  type ReadFileResult,
  type SandboxMetadata,
  type WriteFileOpts,
} from '../provider.js';
import { mapE2bError, mapped } from './errors.js';
import { buildExecScript, CANCEL_SIGNAL, EXEC_COMMAND_VAR, TIMED_OUT_EXIT } from './exec-script.js';
import { toMetadata } from './metadata.js';

/** Configuration from the server (never from tool arguments). */
export interface E2bProviderOpts {
  /** Defaults to $E2B_API_KEY; without one every call fails with `authentication`. */
  apiKey?: string;
  /** Defaults to $E2B_DOMAIN, then the SDK's default (e2b.app). */
  domain?: string;
  /** Control-plane URL; defaults to the SDK's ($E2B_API_URL or https://api.<domain>). */
  apiUrl?: string;
  /** envd URL; defaults to the SDK's ($E2B_SANDBOX_URL or per-sandbox hosts). */
  sandboxUrl?: string;
  /** Per-request timeout of control-plane and envd calls (the SDK's default is 60 s). */
  requestTimeoutMs?: number;
  /** Seconds between TERM and KILL of a timed-out or cancelled command's process group. */
  killGraceS?: number;
  /**
   * After a cancelled exec's group has had its grace period, how long more to wait for the wrapper
   * to report before giving up on it (SIGKILL to the wrapper, exit code unknown).
   */
  cancelSettleMs?: number;
  /** Subtracted from the remaining lifetime a connect asks for, so request latency never extends it. */
  connectMarginMs?: number;
  /** Most envd connections (Sandbox objects) kept for reuse; the least recently used is dropped. */
  maxConnections?: number;
}

const DEFAULT_TEMPLATE = 'base';
// Linux caps one argv or environment string at 128 KiB; the command is one of each.
const MAX_COMMAND_BYTES = 120 * 1024;
// envd's own deadline for exec is a backstop behind the wrapper's watchdog.
const ENVD_BACKSTOP_S = 15;
const STATUSES = ['running', 'paused'] as const;
const QUIET_LOGGER = {};

const UNSUPPORTED_RESOURCES =
  'E2B has no region, cpu or memory options: cpu and memory are chosen by building a template (e2b template build --cpu-count/--memory-mb); region is not an E2B option.';

/** A sandbox path as a shell word: under the home it is written relative to $HOME. */
function shellPathExpr(p: string): { expr: string; env: Record<string, string> } {
  const key = `P${randomBytes(4).toString('hex')}`;
  if (p === SANDBOX_HOME || p.startsWith(SANDBOX_HOME + '/'))
    return { expr: `"$HOME/\${${key}}"`, env: { [key]: p.slice(SANDBOX_HOME.length + 1) } };
  return { expr: `"\${${key}}"`, env: { [key]: p } };
}

/** The command's exit code; a nonzero one arrives as CommandExitError. */
async function exitOf(handle: CommandHandle): Promise<number> {
  try {
    return (await handle.wait()).exitCode;
  } catch (e) {
    if (e instanceof CommandExitError) return e.exitCode;
    throw e;
  }
}

function toArrayBuffer(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}

function fileType(t: string | undefined): FileEntry['type'] {
  return t === 'dir' ? 'directory' : t === 'file' ? 'file' : t === 'symlink' ? 'symlink' : 'other';
}

/** Creates the e2b provider; no network call happens until a method is used. */
export function createE2bProvider(opts: E2bProviderOpts = {}): Provider {
  const apiKey = opts.apiKey ?? process.env.E2B_API_KEY;
  const domain = opts.domain ?? process.env.E2B_DOMAIN;
  const killGraceS = opts.killGraceS ?? 2;
  const cancelSettleMs = opts.cancelSettleMs ?? 5000;
  const connectMarginMs = opts.connectMarginMs ?? 2000;
  const maxConnections = opts.maxConnections ?? 256;
  // Sandbox objects (with their envd token) obtained in this process, per sandbox id.
  // Sandboxes that expire are never told to us, so the cache is bounded (least recently used
  // goes first); a forgotten sandbox is simply reconnected, without extension, on its next use.
  const connected = new Map<string, Promise<Sandbox>>();
  function remember(sandboxId: string, p: Promise<Sandbox>): void {
    connected.delete(sandboxId);
    connected.set(sandboxId, p);
    if (connected.size > maxConnections) connected.delete(connected.keys().next().value!);
  }

  function conn(): {
    apiKey: string;
    logger: typeof QUIET_LOGGER;
    domain?: string;
    apiUrl?: string;
    sandboxUrl?: string;
    requestTimeoutMs?: number;
  } {
    if (!apiKey) {
      throw new ProviderError('authentication', {
        code: 'MissingApiKey',
        detail: 'E2B is not configured: set E2B_API_KEY in the server environment.',
      });
    }
    return {
      apiKey,
      // The SDK's default request logging (enabled by E2B_USER_AGENT_SOURCE=ci) writes raw lines to
      // stderr, which is this server's structured log: keep it silent.
      logger: QUIET_LOGGER,
      ...(domain ? { domain } : {}),
      ...(opts.apiUrl ? { apiUrl: opts.apiUrl } : {}),
      ...(opts.sandboxUrl ? { sandboxUrl: opts.sandboxUrl } : {}),
      ...(opts.requestTimeoutMs ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
    };
  }

  // Reaches envd without lengthening the lifetime: a running sandbox is connected with at most
  // its remaining lifetime; a paused one is resumed by the SDK's normal connect (the platform's
  // lifecycle behaviour, with its default timeout).
  async function connectQuietly(sandboxId: string): Promise<Sandbox> {
    const c = conn();
    const info = await Sandbox.getInfo(sandboxId, c);
    if (info.state === 'paused') return Sandbox.connect(sandboxId, c);
    const remainingS = Math.max(0, Math.floor((info.endAt.getTime() - Date.now() - connectMarginMs) / 1000));
    return Sandbox.connect(sandboxId, { ...c, timeoutMs: remainingS * 1000 });
  }

  function envd(sandboxId: string): Promise<Sandbox> {
    let p = connected.get(sandboxId);
    if (!p) {
      p = connectQuietly(sandboxId);
      p.catch(() => {
        if (connected.get(sandboxId) === p) connected.delete(sandboxId);
      });
    }
    remember(sandboxId, p);
    return p;
  }

  // Runs an envd operation; a sandbox that is gone drops its cached connection. envd reports a
  // sandbox that was killed or expired meanwhile as a timeout (E2B's proxy answers 502), so a
  // timeout or unavailable answer is checked against the control plane before it is reported.
  async function withEnvd<T>(sandboxId: string, fn: (sb: Sandbox) => Promise<T>): Promise<T> {
    try {
      return await fn(await envd(sandboxId));
    } catch (e) {
      const err = mapE2bError(e);
      if (err.category === 'not_found' && err.code === 'SandboxNotFoundError') connected.delete(sandboxId);
      if (err.category === 'timeout' || err.category === 'unavailable') {
        connected.delete(sandboxId);
        if (await isGone(sandboxId)) throw new ProviderError('not_found', { status: 404, code: 'SandboxNotFoundError' });
      }
      throw err;
    }
  }

  /** True only when the control plane says the sandbox does not exist (any other answer: false). */
  async function isGone(sandboxId: string): Promise<boolean> {
    try {
      await Sandbox.getInfo(sandboxId, conn());
      return false;
    } catch (e) {
      return mapE2bError(e).category === 'not_found';
    }
  }

  async function runShell(sb: Sandbox, script: string, envs: Record<string, string>): Promise<string> {
    try {
      return (await sb.commands.run(script, { envs, timeoutMs: 60_000 })).stdout;
    } catch (e) {
      if (e instanceof CommandExitError) {
        throw new ProviderError(/No such file|not found/i.test(e.stderr) ? 'not_found' : 'internal', { code: 'ShellHelperFailed' });
      }
      throw e;
    }
  }

  // Cancels a running exec when `signal` aborts: the wrapper gets CANCEL_SIGNAL through a second
  // envd command (the SDK can only send SIGKILL, which the wrapper cannot trap), and its trap
  // signals the command's group. `gaveUp` resolves to -1 (unknown) if the wrapper has not
  // reported within the grace period plus cancelSettleMs; the wrapper is then SIGKILLed.
  function watchCancel(
    sb: Sandbox,
    handle: CommandHandle,
    signal: AbortSignal,
  ): { requested: boolean; gaveUp: Promise<number>; dispose: () => void } {
    let timer: NodeJS.Timeout | undefined;
    let resolveGaveUp: (code: number) => void = () => undefined;
    const state = {
      requested: false,
      gaveUp: new Promise<number>((r) => (resolveGaveUp = r)),
      dispose: () => {
        signal.removeEventListener('abort', onAbort);
        if (timer) clearTimeout(timer);
      },
    };
    function onAbort(): void {
      if (state.requested) return;
      state.requested = true;
      timer = setTimeout(
        () => {
          // Best effort after the grace period: the watcher reports the outcome, not these calls.
          handle.kill().catch(() => false);
          handle.disconnect().catch(() => undefined);
          resolveGaveUp(-1);
        },
        killGraceS * 1000 + cancelSettleMs,
      );
      timer.unref();
      sb.commands.run(`kill -${CANCEL_SIGNAL} ${handle.pid}`, { timeoutMs: cancelSettleMs }).catch(() => undefined);
    }
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    return state;
  }

  const provider: Provider = {
    id: 'e2b',

    async create(o: CreateOpts): Promise<SandboxMetadata> {
      if (o.region !== undefined || o.cpu !== undefined || o.memoryMb !== undefined) {
        throw new ProviderError('unsupported', { code: 'UnsupportedOption', detail: UNSUPPORTED_RESOURCES });
      }
      const c = conn();
      const sb = await mapped(() =>
        Sandbox.create(o.template ?? DEFAULT_TEMPLATE, {
          ...c,
          ...(o.timeoutS !== undefined ? { timeoutMs: o.timeoutS * 1000 } : {}),
          ...(o.envs ? { envs: o.envs } : {}),
        }),
      );
      remember(sb.sandboxId, Promise.resolve(sb));
      try {
        return toMetadata(await Sandbox.getInfo(sb.sandboxId, c));
      } catch (e) {
        // Nobody would learn this sandbox's id: do not leave it running.
        connected.delete(sb.sandboxId);
        await Sandbox.kill(sb.sandboxId, c).catch(() => undefined);
        throw mapE2bError(e);
      }
    },

    async list(o: ListOpts): Promise<SandboxMetadata[]> {
      if (o.status !== undefined && !(STATUSES as readonly string[]).includes(o.status)) {
        throw new ProviderError('invalid_argument', { code: 'InvalidStatus', detail: 'E2B sandbox status is one of: running, paused.' });
      }
      if (o.region !== undefined) throw new ProviderError('unsupported', { code: 'UnsupportedOption', detail: UNSUPPORTED_RESOURCES });
      const c = conn();
      return mapped(async () => {
        const pages = Sandbox.list({
          ...c,
          ...(o.status ? { query: { state: [o.status as (typeof STATUSES)[number]] } } : {}),
          limit: Math.min(100, o.offset + o.limit),
        });
        // Only the requested window is kept: a large offset walks pages without holding them.
        const window: SandboxMetadata[] = [];
        let seen = 0;
        while (pages.hasNext && window.length < o.limit) {
          for (const item of await pages.nextItems()) {
            if (seen >= o.offset && window.length < o.limit) window.push(toMetadata(item));
            seen += 1;
          }
        }
        return window;
      });
    },

    async getInfo(sandboxId: string): Promise<SandboxMetadata> {
      const c = conn();
      return mapped(async () => toMetadata(await Sandbox.getInfo(sandboxId, c)));
    },

    async setTimeout(sandboxId: string, timeoutS: number): Promise<void> {
      const c = conn();
      await mapped(() => Sandbox.setTimeout(sandboxId, timeoutS * 1000, c));
    },

    async kill(sandboxId: string): Promise<void> {
      const c = conn();
      const killed = await mapped(() => Sandbox.kill(sandboxId, c));
      connected.delete(sandboxId);
      if (!killed) throw new ProviderError('not_found', { status: 404, code: 'SandboxNotFoundError' });
    },

    async exec(sandboxId: string, command: string, o: ExecOpts): Promise<ExecResult> {
      if (Buffer.byteLength(command) > MAX_COMMAND_BYTES) {
        throw new ProviderError('invalid_argument', {
          code: 'CommandTooLong',
          detail: 'The command is too long for one process argument (about 120 KiB); put it in a file.',
        });
      }
      if (o.signal?.aborted) throw cancelledBeforeStart();
      const cap = o.maxOutputBytes ?? DEFAULT_EXEC_OUTPUT_CAP_BYTES;
      const stdout = new OutputCapture(cap);
      const stderr = new OutputCapture(cap);
      const startedMs = Date.now();
      const exitCode = await withEnvd(sandboxId, async (sb) => {
        // Connecting may have taken a while: a call cancelled meanwhile still starts nothing.
        if (o.signal?.aborted) throw cancelledBeforeStart();
        // The SDK hands output over decoded as UTF-8; it is re-encoded here for the byte caps.
        const handle = await sb.commands.run(buildExecScript(o.timeoutS, killGraceS), {
          background: true,
          stdin: o.stdin !== undefined,
          ...(o.cwd !== undefined ? { cwd: resolveSandboxPath(o.cwd) } : {}),
          envs: { ...(o.envs ?? {}), [EXEC_COMMAND_VAR]: command },
          timeoutMs: (o.timeoutS + killGraceS + ENVD_BACKSTOP_S) * 1000,
          onStdout: (s: string) => stdout.push(Buffer.from(s, 'utf8')),
          onStderr: (s: string) => stderr.push(Buffer.from(s, 'utf8')),
        });
        const cancel = o.signal ? watchCancel(sb, handle, o.signal) : undefined;
        try {
          if (o.stdin !== undefined) {
            if (o.stdin.length > 0) await handle.sendStdin(new Uint8Array(o.stdin));
            await handle.closeStdin();
          }
          return await Promise.race([exitOf(handle), ...(cancel ? [cancel.gaveUp] : [])]);
        } catch (e) {
          // Cancelled while feeding stdin (the wrapper may be gone): report the outcome, not the failure.
          if (cancel?.requested) return await Promise.race([exitOf(handle), cancel.gaveUp]);
          await handle.kill().catch(() => false);
          throw e;
        } finally {
          cancel?.dispose();
        }
      });
      const timedOut = exitCode === TIMED_OUT_EXIT && Date.now() - startedMs >= o.timeoutS * 1000 - 250;
      return {
        exitCode: exitCode < 0 ? null : exitCode,
        stdout: stdout.data,
        stderr: stderr.data,
        stdoutTruncated: stdout.truncated,
        stderrTruncated: stderr.truncated,
        stdoutHeadBytes: stdout.splitAt,
        stderrHeadBytes: stderr.splitAt,
        timedOut,
      };
    },

    // Reads [offset, offset+length) from a stream and cancels it there, so a chunked download of a
    // large file does not transfer the whole file each time (bytes before offset are still read).
    async readFile(sandboxId: string, p: string, o: ReadFileOpts = {}): Promise<ReadFileResult> {
      const abs = resolveSandboxPath(p);
      return withEnvd(sandboxId, async (sb) => {
        const info = await sb.files.getInfo(abs);
        if (info.type === 'dir')
          throw new ProviderError('invalid_argument', { code: 'IsADirectory', detail: 'The path is a directory; use list_files.' });
        const size = info.size;
        const start = Math.min(o.offset ?? 0, size);
        const end = Math.min(size, o.length !== undefined ? start + o.length : size);
        if (end <= start) return { data: Buffer.alloc(0), size };
        const stream = await sb.files.read(abs, { format: 'stream' });
        const reader = stream.getReader();
        const parts: Buffer[] = [];
        let pos = 0;
        try {
          while (pos < end) {
            const { done, value } = await reader.read();
            if (done) break;
            const chunk = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
            const from = Math.max(0, start - pos);
            const to = Math.min(chunk.length, end - pos);
            if (to > from) parts.push(Buffer.from(chunk.subarray(from, to)));
            pos += chunk.length;
          }
        } finally {
          await reader.cancel().catch(() => undefined);
        }
        return { data: Buffer.concat(parts), size };
      });
    },

    // envd's upload creates parent directories. An append uploads to a temporary file and
    // concatenates in the sandbox (binary-safe, and the existing content never travels).
    async writeFile(sandboxId: string, p: string, data: Buffer, o: WriteFileOpts = {}): Promise<{ size: number }> {
      const abs = resolveSandboxPath(p);
      return withEnvd(sandboxId, async (sb) => {
        if (!o.append) {
          await sb.files.write(abs, toArrayBuffer(data), { useOctetStream: true });
          return { size: data.length };
        }
        const tmp = `/tmp/.sandbox-mcp-append-${randomBytes(8).toString('hex')}`;
        await sb.files.write(tmp, toArrayBuffer(data), { useOctetStream: true });
        const target = shellPathExpr(abs);
        const script = `t=${target.expr}; mkdir -p -- "$(dirname -- "$t")" && cat -- "$SRC" >> "$t"; rc=$?; rm -f -- "$SRC"; [ "$rc" -eq 0 ] && stat -c %s -- "$t"`;
        const out = await runShell(sb, script, { ...target.env, SRC: tmp });
        const size = Number.parseInt(out.trim(), 10);
        if (!Number.isFinite(size)) throw new ProviderError('internal', { code: 'AppendFailed' });
        return { size };
      });
    },

    async listFiles(sandboxId: string, p: string, o: ListFilesOpts): Promise<FileEntry[]> {
      const abs = resolveSandboxPath(p);
      return withEnvd(sandboxId, async (sb) => {
        const entries = await sb.files.list(abs, { depth: o.depth });
        return entries.slice(0, o.maxEntries).map((e) => ({
          name: e.name,
          path: e.path,
          type: fileType(e.type),
          size: e.size,
          modified_at: e.modifiedTime instanceof Date && !Number.isNaN(e.modifiedTime.getTime()) ? e.modifiedTime.toISOString() : null,
        }));
      });
    },

    async close(): Promise<void> {
      connected.clear();
    },
  };
  return provider;
}
