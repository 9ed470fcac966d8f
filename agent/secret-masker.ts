// Streaming replacement of known secret values. Every occurrence of every secret is masked, even
// where occurrences overlap (of two secrets, or of one secret with itself): overlapping
// occurrences merge into one masked span, replaced by one marker. Masking only the leftmost of two
// overlapping secrets would print the rest of the other one. A value may arrive split across any
// number of reads, so the masker holds back the shortest tail that could still grow into a
// secret, and nothing else: output is the same as masking the whole stream at once, however the
// input was chunked.
import { LIMITS, SECRET_MARKER, SECRET_NAME_PATTERN } from '../shared/limits.js';

/** The exact values worth masking: env vars whose names match SECRET_NAME_PATTERN, at least secretMinBytes long. */
export function secretValuesFromEnv(env: NodeJS.ProcessEnv): string[] {
  const values = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (value && SECRET_NAME_PATTERN.test(name) && Buffer.byteLength(value) >= LIMITS.secretMinBytes) values.add(value);
  }
  return [...values];
}

/** Masks secret values in a byte stream; `emit` receives the masked bytes in order. */
export class SecretMasker {
  private readonly secrets: Buffer[];
  private readonly maxLen: number;
  private readonly marker: Buffer;
  /** Held-back bytes (fewer than the longest secret), re-scanned with the next chunk. */
  private pending: Buffer | null = null;
  /** How many leading pending bytes a marker already stands for (a span that may still grow). */
  private covered = 0;

  constructor(
    values: readonly string[],
    private readonly emit: (bytes: Buffer) => void,
    marker: string = SECRET_MARKER,
  ) {
    const unique = [...new Set(values)].filter((v) => Buffer.byteLength(v) >= LIMITS.secretMinBytes);
    this.secrets = unique.map((v) => Buffer.from(v));
    this.maxLen = Math.max(0, ...this.secrets.map((s) => s.length));
    this.marker = Buffer.from(marker);
  }

  /** True when there is nothing to mask: bytes pass straight through. */
  get isPassThrough(): boolean {
    return this.secrets.length === 0;
  }

  /** Bytes held back that the output does not represent yet (they might begin a secret). */
  get pendingBytes(): number {
    return (this.pending?.length ?? 0) - this.covered;
  }

  /** Feeds one chunk. The chunk is not retained (callers may reuse its memory afterwards). */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.secrets.length === 0) {
      this.emit(chunk);
      return;
    }
    const data = this.pending ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = null;
    this.scan(data, false);
  }

  /** End of stream: whatever was held back cannot become a secret any more. */
  flush(): void {
    const data = this.pending;
    this.pending = null;
    if (data) this.scan(data, true);
    this.covered = 0;
  }

  private scan(data: Buffer, isFinal: boolean): void {
    const end = data.length;
    // Bytes from `hold` on could begin an occurrence that completes in a later chunk.
    const hold = isFinal ? end : this.holdStart(data);
    const next = this.secrets.map((s) => data.indexOf(s));
    // The masked span being built: [spanStart, spanEnd); a carried-over span is already emitted.
    let spanStart = 0;
    let spanEnd = this.covered;
    let isEmitted = this.covered > 0;
    let pos = 0; // everything before pos has been emitted (or is represented by a marker)
    this.covered = 0;
    for (;;) {
      // The next occurrence, in order of start.
      let best = -1;
      for (let i = 0; i < next.length; i++) if (next[i]! !== -1 && (best === -1 || next[i]! < next[best]!)) best = i;
      const at = best === -1 ? -1 : next[best]!;
      if (at !== -1 && at < spanEnd) {
        // Overlaps the span: it grows, still one marker.
        spanEnd = Math.max(spanEnd, at + this.secrets[best]!.length);
        next[best] = data.indexOf(this.secrets[best]!, at + 1);
        continue;
      }
      // The span is complete within this data; settle it before looking at the next one.
      if (spanEnd > spanStart) {
        if (!isEmitted) {
          // Bytes before the span that are still held back must come out first: wait for them.
          if (spanStart > hold) break;
          if (spanStart > pos) this.emit(data.subarray(pos, spanStart));
          this.emit(this.marker);
        }
        pos = spanEnd;
        if (spanEnd > hold) {
          // A later occurrence may still overlap the span's end: keep its bytes, marked as covered.
          this.covered = spanEnd - hold;
          break;
        }
      }
      if (at === -1) break;
      spanStart = at;
      spanEnd = at + this.secrets[best]!.length;
      isEmitted = false;
      next[best] = data.indexOf(this.secrets[best]!, at + 1);
    }
    if (hold > pos) this.emit(data.subarray(pos, hold));
    if (hold < end) this.pending = Buffer.from(data.subarray(hold));
  }

  /** Start of the longest tail of data that is a proper prefix of some secret; data.length if none. */
  private holdStart(data: Buffer): number {
    const end = data.length;
    for (let p = Math.max(0, end - this.maxLen + 1); p < end; p++) {
      const tailLen = end - p;
      for (const secret of this.secrets) {
        if (secret.length > tailLen && secret[0] === data[p] && data.compare(secret, 0, tailLen, p, end) === 0) return p;
      }
    }
    return end;
  }
}

/** Length in bytes of the longest secret a masker of `values` masks (0: none). */
export function longestSecretBytes(values: readonly string[]): number {
  return Math.max(0, ...values.map((v) => Buffer.byteLength(v)).filter((n) => n >= LIMITS.secretMinBytes));
}

/**
 * Masks `raw`, the last bytes of a stream whose earlier bytes are gone, keeping at most `keepBytes`
 * of the result. An occurrence may straddle the start of `raw`: its visible end is no secret the
 * masker could recognize. Such an end lies within the first (longest secret - 1) bytes, so those
 * are dropped, and with them any occurrence that covers the new start (it would be cut the same
 * way); everything from there on is masked as a stream of its own.
 */
export function maskStreamEnd(values: readonly string[], raw: Buffer, keepBytes: number): Buffer {
  const secrets = [...new Set(values)].map((v) => Buffer.from(v)).filter((s) => s.length >= LIMITS.secretMinBytes);
  let start = Math.min(raw.length, Math.max(0, longestSecretBytes(values) - 1));
  const occurrences: [number, number][] = [];
  for (const s of secrets) {
    for (let at = raw.indexOf(s); at !== -1 && at < raw.length; at = raw.indexOf(s, at + 1)) occurrences.push([at, at + s.length]);
  }
  occurrences.sort((a, b) => a[0] - b[0]);
  // In order of start, an occurrence starting before `start` and ending after it moves it on.
  for (const [from, to] of occurrences) {
    if (from >= start) break;
    if (to > start) start = to;
  }
  const out: Buffer[] = [];
  const masker = new SecretMasker(values, (b) => out.push(Buffer.from(b)));
  masker.push(raw.subarray(start));
  masker.flush();
  const masked = Buffer.concat(out);
  return masked.length > keepBytes ? masked.subarray(masked.length - keepBytes) : masked;
}
