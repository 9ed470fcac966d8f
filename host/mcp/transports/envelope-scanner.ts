// Reads the top-level `id` and `method` of a JSON object streamed through it in pieces, keeping
// only a few bytes: enough to answer a message too large to hold (the MCP SDK's client writes
// `id` after `params`, so it sits at the far end of a huge line) without ever buffering it.
import { definedFields } from '../../util/defined-fields.js';
import { asRequestId } from './message-check.js';
import type { RequestId } from '@modelcontextprotocol/sdk/types.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/** Longest key or value kept while scanning; longer ones are not an id or a method we could answer. */
const MAX_KEPT_BYTES = 256;
const WANTED_KEYS = new Set(['id', 'method']);

/** Where the scan is within the top-level object (depth 1). */
type Phase = 'key' | 'colon' | 'value' | 'scalar' | 'after';

/** A byte-at-a-time scanner over one JSON text; feed() it the pieces, then read result(). */
export class EnvelopeScanner {
  private depth = 0;
  private isInString = false;
  private isEscaped = false;
  private isDone = false;
  private phase: Phase = 'key';
  /** Bytes of the key or wanted value being read at depth 1, or undefined when not keeping. */
  private kept: number[] | undefined;
  private key: string | undefined;
  private readonly values = new Map<string, string>();

  /** Scans the next piece of the text. */
  feed(piece: Uint8Array): void {
    for (const byte of piece) this.step(byte);
  }

  /** The top-level id (string or integer) and method the text had, as far as they could be read. */
  result(): { id?: RequestId; method?: string } {
    const id = asRequestId(this.parsed('id'));
    const method = this.parsed('method');
    return definedFields({ id, method: typeof method === 'string' ? method : undefined });
  }

  private parsed(key: string): unknown {
    const raw = this.values.get(key);
    if (raw === undefined) return undefined;
    try {
      return JSON.parse(raw);
    } catch {
      return undefined;
    }
  }

  private keep(byte: number): void {
    if (!this.kept) return;
    if (this.kept.length < MAX_KEPT_BYTES) this.kept.push(byte);
    else this.kept = undefined;
  }

  private step(byte: number): void {
    if (this.isInString) return this.stepInString(byte);
    if (this.depth !== 1) return this.stepNested(byte);
    switch (this.phase) {
      case 'key':
        if (byte === QUOTE) {
          this.isInString = true;
          this.kept = [];
        } else if (byte === CLOSE_BRACE) this.end();
        return;
      case 'colon':
        if (byte === COLON) this.phase = 'value';
        return;
      case 'value':
        if (isSpace(byte)) return;
        this.kept = this.key !== undefined && WANTED_KEYS.has(this.key) ? [] : undefined;
        if (byte === QUOTE) {
          this.keep(byte);
          this.isInString = true;
        } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
          this.kept = undefined;
          this.depth = 2;
        } else {
          this.keep(byte);
          this.phase = 'scalar';
        }
        return;
      case 'scalar':
        if (byte === COMMA || byte === CLOSE_BRACE || isSpace(byte)) {
          this.storeValue();
          this.afterValue(byte);
        } else this.keep(byte);
        return;
      case 'after':
        this.afterValue(byte);
    }
  }

  private stepInString(byte: number): void {
    if (this.depth === 1) this.keep(byte);
    if (this.isEscaped) this.isEscaped = false;
    else if (byte === BACKSLASH) this.isEscaped = true;
    else if (byte === QUOTE) {
      this.isInString = false;
      if (this.depth !== 1) return;
      if (this.phase === 'key') {
        // The closing quote was kept too: drop it to get the key's bytes.
        this.key = this.kept ? Buffer.from(this.kept.slice(0, -1)).toString('utf8') : undefined;
        this.kept = undefined;
        this.phase = 'colon';
      } else {
        this.storeValue();
        this.phase = 'after';
      }
    }
  }

  /** Outside the top-level object (before it, or after it ended) and inside nested values. */
  private stepNested(byte: number): void {
    if (this.depth === 0) {
      // Only a text that is one object counts (not a batch, not what follows the object).
      if (this.isDone || isSpace(byte)) return;
      if (byte === OPEN_BRACE) this.depth = 1;
      else this.isDone = true;
      return;
    }
    if (byte === QUOTE) this.isInString = true;
    else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) this.depth++;
    else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      this.depth--;
      if (this.depth === 1) this.phase = 'after';
    }
  }

  private afterValue(byte: number): void {
    if (byte === COMMA) this.phase = 'key';
    else if (byte === CLOSE_BRACE) this.end();
  }

  private end(): void {
    this.depth = 0;
    this.isDone = true;
  }

  private storeValue(): void {
    if (this.kept && this.key !== undefined) this.values.set(this.key, Buffer.from(this.kept).toString('utf8'));
    this.kept = undefined;
  }
}

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}
