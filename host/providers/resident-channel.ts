// The host's side of a resident agent's stream (shared/resident.ts), over whatever carries its
// lines: a Unix socket to the keeper's relay (local), a background command's stdin and stdout
// (e2b). One channel per (server process, sandbox): requests get ids of their own and answers
// come in any order. Nothing from the resident is trusted beyond the shared schemas: the greeting
// and every answer are validated, a line outside the protocol ends the channel, every request has
// a time bound. A request the channel could not send fails with ResidentUnreachable (the caller
// may run it another way: nothing happened); one sent and then lost with ResidentLost (its
// outcome is unknown).
import { agentSupportsOp, PROTOCOL_VERSION, type AgentRequestInput, type AgentResponse, type OpName } from '../../shared/protocol.js';
import { asciiJson, ResidentFrameSchema, type ResidentHello } from '../../shared/resident.js';
import { ProviderError } from './provider-error.js';
import type { AgentChannel, AgentChannelRequestOpts } from './provider.js';

/** A duplex stream of lines (each without its newline; ASCII). */
export interface LineTransport {
  /** Writes one line (the newline is added). */
  write(line: string): void;
  /** Calls `onLine` with every line read, `onClose` once when the stream ends or fails. */
  start(onLine: (line: Buffer) => void, onClose: () => void): void;
  close(): void;
  /** Keeps the process alive while requests are in flight (an idle channel must not). */
  setBusy?(isBusy: boolean): void;
}

/** The resident could not be asked: the request was never sent (run it another way). */
export class ResidentUnreachable extends Error {
  constructor(readonly reason: 'no_greeting' | 'closed' | 'protocol') {
    super(`resident unreachable: ${reason}`);
    this.name = 'ResidentUnreachable';
  }
}

/**
 * The request was sent, but no answer came (the resident went away, or its time ran out): its
 * outcome is unknown. `aborted`: the caller gave up on a request that has nothing to confirm.
 */
export class ResidentLost extends Error {
  constructor(readonly reason: 'lost' | 'timeout' | 'aborted') {
    super(`resident lost: ${reason}`);
    this.name = 'ResidentLost';
  }
}

/** How one request is bounded. */
export interface ChannelRequestOpts {
  /** After this long without an answer, the request fails with ResidentLost('timeout') (and is aborted). */
  timeoutMs: number;
  /**
   * Aborting asks the resident to abort the request. An exec's answer is still awaited (it says how
   * the killed command ended); any other request fails at once with ResidentLost('aborted').
   */
  signal?: AbortSignal;
}

interface Pending {
  resolve(r: AgentResponse): void;
  reject(e: Error): void;
}

/** One resident's stream, its greeting checked. */
export class ResidentChannel {
  /** The resident's greeting (valid, of this major version). */
  readonly hello: ResidentHello;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private isClosed = false;
  private readonly onClosedListeners: (() => void)[] = [];

  private constructor(
    private readonly transport: LineTransport,
    hello: ResidentHello,
  ) {
    this.hello = hello;
  }

  /**
   * Opens a channel over `transport`: resolves once a valid greeting of this major version came,
   * rejects with ResidentUnreachable when none comes within `greetingTimeoutMs` (or another line,
   * or the end, comes first).
   */
  static open(transport: LineTransport, greetingTimeoutMs: number): Promise<ResidentChannel> {
    return new Promise((resolve, reject) => {
      let channel: ResidentChannel | null = null;
      const fail = (reason: ResidentUnreachable['reason']) => {
        clearTimeout(timer);
        transport.close();
        reject(new ResidentUnreachable(reason));
      };
      const timer = setTimeout(() => fail('no_greeting'), greetingTimeoutMs);
      transport.start(
        (line) => {
          if (channel) return channel.onLine(line);
          const hello = parseGreeting(line);
          if (!hello) return fail('protocol');
          clearTimeout(timer);
          channel = new ResidentChannel(transport, hello);
          resolve(channel);
        },
        () => {
          if (channel) channel.onClose();
          else fail('closed');
        },
      );
    });
  }

  /** True while requests can be sent. */
  get isOpen(): boolean {
    return !this.isClosed;
  }

  /** Requests sent and not yet answered. */
  get pendingCount(): number {
    return this.pending.size;
  }

  /** True when this resident serves `op`. */
  supports(op: OpName): boolean {
    return agentSupportsOp(this.hello, op);
  }

  /** Calls `fn` once the channel is closed (by either side). */
  onClosed(fn: () => void): void {
    if (this.isClosed) fn();
    else this.onClosedListeners.push(fn);
  }

  /** Sends one request and resolves with its answer (schema-checked envelope); see the module comment for failures. */
  request(request: AgentRequestInput, opts: ChannelRequestOpts): Promise<AgentResponse> {
    if (this.isClosed) return Promise.reject(new ResidentUnreachable('closed'));
    const id = this.nextId++;
    return new Promise<AgentResponse>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
        this.pending.delete(id);
        if (this.pending.size === 0) this.transport.setBusy?.(false);
      };
      const onAbort = () => {
        this.send({ id, abort: 'cancelled' });
        if (request.op === 'exec') return;
        done();
        reject(new ResidentLost('aborted'));
      };
      const timer = setTimeout(() => {
        done();
        this.send({ id, abort: 'cancelled' });
        reject(new ResidentLost('timeout'));
      }, opts.timeoutMs);
      if (this.pending.size === 0) this.transport.setBusy?.(true);
      this.pending.set(id, {
        resolve: (r) => {
          done();
          resolve(r);
        },
        reject: (e) => {
          done();
          reject(e);
        },
      });
      try {
        this.transport.write(asciiJson({ id, request }));
      } catch {
        done();
        reject(new ResidentUnreachable('closed'));
        return;
      }
      if (opts.signal?.aborted) onAbort();
      else opts.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Closes the channel; requests in flight fail with ResidentLost. */
  close(): void {
    this.transport.close();
    this.onClose();
  }

  private send(frame: object): void {
    if (this.isClosed) return;
    try {
      this.transport.write(asciiJson(frame));
    } catch {
      // closing: onClose follows
    }
  }

  private onLine(line: Buffer): void {
    let frame: unknown;
    try {
      frame = JSON.parse(line.toString('utf8'));
    } catch {
      frame = undefined;
    }
    const parsed = ResidentFrameSchema.safeParse(frame);
    if (!parsed.success || !('response' in parsed.data)) {
      // Not the protocol: nothing more from this stream is believed.
      this.close();
      return;
    }
    this.pending.get(parsed.data.id)?.resolve(parsed.data.response);
  }

  private onClose(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    for (const p of [...this.pending.values()]) p.reject(new ResidentLost('lost'));
    this.pending.clear();
    for (const fn of this.onClosedListeners.splice(0)) fn();
  }
}

/** The greeting in `line`, or null when it is not one of this protocol's major version. */
function parseGreeting(line: Buffer): ResidentHello | null {
  try {
    const parsed = ResidentFrameSchema.safeParse(JSON.parse(line.toString('utf8')));
    if (!parsed.success || !('hello' in parsed.data)) return null;
    return parsed.data.hello.protocol === PROTOCOL_VERSION ? parsed.data.hello : null;
  } catch {
    return null;
  }
}

/**
 * Completes a start's request with what only the provider knows: the command's environment (the
 * sandbox's variables under the call's), its bounds.
 */
export type StartCompletion = (
  request: AgentRequestInput & { op: 'start' },
  callEnvs: Readonly<Record<string, string>>,
) => AgentRequestInput;

/**
 * `channel` as the provider contract's AgentChannel: a start completed by `completeStart`, and
 * failures as ProviderErrors — `resident_unreachable` (not sent: nothing happened), `agent_lost`
 * (sent, no answer: unknown), `agent_timeout`.
 */
export function asAgentChannel(channel: ResidentChannel, completeStart: StartCompletion): AgentChannel {
  return {
    hello: channel.hello,
    supports: (op) => channel.supports(op),
    async request(request: AgentRequestInput, opts: AgentChannelRequestOpts): Promise<AgentResponse> {
      const complete = request.op === 'start' ? completeStart(request, opts.callEnvs ?? {}) : request;
      try {
        return await channel.request(complete, opts);
      } catch (e) {
        throw channelFailure(e);
      }
    },
  };
}

/** A channel failure as the ProviderError callers branch on. */
export function channelFailure(e: unknown): ProviderError {
  if (e instanceof ResidentUnreachable) return new ProviderError('unavailable', { code: RESIDENT_UNREACHABLE });
  if (e instanceof ResidentLost && e.reason === 'timeout') return new ProviderError('timeout', { code: 'agent_timeout' });
  if (e instanceof ResidentLost && e.reason === 'aborted') {
    return new ProviderError('conflict', { code: 'cancelled', detail: 'The call was cancelled.' });
  }
  return new ProviderError('unavailable', {
    code: 'agent_lost',
    detail: "The sandbox's agent stopped while it handled the call; its outcome is unknown.",
  });
}

/** The code of a request the resident never got (nothing happened: it may be run another way). */
export const RESIDENT_UNREACHABLE = 'resident_unreachable';
