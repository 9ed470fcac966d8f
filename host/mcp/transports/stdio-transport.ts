// MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, in place of the SDK's
// StdioServerTransport, whose read buffer throws past 10 MiB and then silently stops reading — the
// process was left with nothing to wait for and died (exit 13) before its session's cleanup ran.
// Here a message over the cap is skipped without being held and answered with an error, a
// malformed line is answered where JSON-RPC allows, and every way the input ends (EOF, a read or
// write error) resolves `ended` with a reason, so the session always ends the one way.
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import type { Readable, Writable } from 'node:stream';
import { EnvelopeScanner } from './envelope-scanner.js';
import { errorReply, refusal, screenEnvelope, type Refused } from './message-check.js';

/** Largest message read from stdin (the SDK's limit too); a larger one is skipped and answered with an error. */
export const STDIO_MESSAGE_MAX_BYTES = 10 * 1024 * 1024;

/** Why the input side of a stdio session ended. */
export type StdioEndReason = 'eof' | 'stdin_error' | 'stdout_error';

export interface StdioTransportOpts {
  stdin?: Readable;
  stdout?: Writable;
  maxMessageBytes?: number;
  /** Told about every refused message, with a static reason (never its content). */
  onRefused?: (reason: string) => void;
}

const NEWLINE = 0x0a;

/** A stdio Transport that never stops reading on bad input and reports how its input ended. */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** Resolves once, with the first way the input ended (EOF, or a stdin or stdout error). */
  readonly ended: Promise<StdioEndReason>;

  private readonly stdin: Readable;
  private readonly stdout: Writable;
  private readonly maxMessageBytes: number;
  private readonly onRefused: (reason: string) => void;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Set while skipping the rest of a message over the cap. */
  private oversized: EnvelopeScanner | undefined;
  private isClosed = false;
  private endWith!: (reason: StdioEndReason) => void;

  constructor(opts: StdioTransportOpts = {}) {
    this.stdin = opts.stdin ?? process.stdin;
    this.stdout = opts.stdout ?? process.stdout;
    this.maxMessageBytes = opts.maxMessageBytes ?? STDIO_MESSAGE_MAX_BYTES;
    this.onRefused = opts.onRefused ?? (() => undefined);
    this.ended = new Promise((resolve) => (this.endWith = resolve));
  }

  async start(): Promise<void> {
    this.stdin.on('data', this.onData);
    this.stdin.on('end', this.onEnd);
    this.stdin.on('close', this.onEnd);
    this.stdin.on('error', this.onStdinError);
    this.stdout.on('error', this.onStdoutError);
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.isClosed || this.stdout.destroyed || !this.stdout.writable) throw new Error('stdout is closed');
    const text = JSON.stringify(message) + '\n';
    await new Promise<void>((resolve, reject) => {
      // The callback reports this write's own failure; 'error' (above) ends the session.
      this.stdout.write(text, (e) => (e ? reject(e) : resolve()));
    });
  }

  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.stdin.off('data', this.onData);
    this.stdin.pause();
    this.pending = [];
    this.oversized = undefined;
    this.onclose?.();
  }

  private readonly onEnd = (): void => this.endWith('eof');

  private readonly onStdinError = (e: Error): void => {
    this.onerror?.(e);
    this.endWith('stdin_error');
  };

  private readonly onStdoutError = (e: Error): void => {
    this.onerror?.(e);
    this.endWith('stdout_error');
  };

  private readonly onData = (chunk: Buffer): void => {
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf(NEWLINE, start);
      this.take(chunk.subarray(start, newline === -1 ? chunk.length : newline));
      if (newline === -1) return;
      this.endLine();
      start = newline + 1;
    }
  };

  /** Adds a piece of the current line, switching to skipping once it passes the cap. */
  private take(piece: Buffer): void {
    if (this.oversized) return this.oversized.feed(piece);
    if (this.pendingBytes + piece.length <= this.maxMessageBytes) {
      this.pending.push(piece);
      this.pendingBytes += piece.length;
      return;
    }
    this.oversized = new EnvelopeScanner();
    for (const held of this.pending) this.oversized.feed(held);
    this.oversized.feed(piece);
    this.pending = [];
    this.pendingBytes = 0;
  }

  private endLine(): void {
    if (this.oversized) {
      const { id, method } = this.oversized.result();
      this.oversized = undefined;
      const message = `Invalid Request: the message is larger than this transport's limit of ${this.maxMessageBytes} bytes`;
      return this.refuse(refusal(id, method !== undefined, ErrorCode.InvalidRequest, message, 'oversized'));
    }
    const line = Buffer.concat(this.pending).toString('utf8').replace(/\r$/, '');
    this.pending = [];
    this.pendingBytes = 0;
    if (line.trim() === '') return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      return this.refuse({
        ok: false,
        reason: 'parse_error',
        reply: errorReply(undefined, ErrorCode.ParseError, 'Parse error: the line is not JSON'),
      });
    }
    const screened = screenEnvelope(raw);
    if (!screened.ok) return this.refuse(screened);
    try {
      this.onmessage?.(screened.message);
    } catch (e) {
      this.onerror?.(e instanceof Error ? e : new Error('message handler failed'));
    }
  }

  private refuse(screened: Refused): void {
    this.onRefused(screened.reason);
    if (screened.reply) this.send(screened.reply).catch((e: unknown) => this.onerror?.(e instanceof Error ? e : new Error('reply failed')));
  }
}
