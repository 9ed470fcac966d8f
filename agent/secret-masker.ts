// Streaming replacement of known secret values. A value may arrive split across any number of
// reads, so the masker holds back the shortest tail that could still grow into a secret, and
// nothing else: output is the same as masking the whole stream at once (leftmost match first,
// the longest secret on a tie), however the input was chunked.
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
  private pending: Buffer | null = null;

  constructor(
    values: readonly string[],
    private readonly emit: (bytes: Buffer) => void,
    marker: string = SECRET_MARKER,
  ) {
    const unique = [...new Set(values)].filter((v) => Buffer.byteLength(v) >= LIMITS.secretMinBytes);
    // Longest first, so that on a tie at one position the longest secret wins.
    this.secrets = unique.map((v) => Buffer.from(v)).sort((a, b) => b.length - a.length);
    this.maxLen = this.secrets[0]?.length ?? 0;
    this.marker = Buffer.from(marker);
  }

  /** True when there is nothing to mask: bytes pass straight through. */
  get isPassThrough(): boolean {
    return this.secrets.length === 0;
  }

  /** Bytes currently held back because they might begin a secret. */
  get pendingBytes(): number {
    return this.pending?.length ?? 0;
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
  }

  private scan(data: Buffer, isFinal: boolean): void {
    const end = data.length;
    const nextMatch = new Array<number>(this.secrets.length).fill(-2);
    let pos = 0;
    let hold = isFinal ? end : this.holdStart(data, Math.max(0, end - this.maxLen + 1));
    while (pos < end) {
      if (hold < pos) hold = this.holdStart(data, pos);
      // The earliest complete match at or after pos; secrets are sorted longest first.
      let matchAt = -1;
      let matchLen = 0;
      for (let i = 0; i < this.secrets.length; i++) {
        const secret = this.secrets[i]!;
        let at = nextMatch[i]!;
        if (at !== -1 && at < pos) nextMatch[i] = at = data.indexOf(secret, pos);
        if (at !== -1 && (matchAt === -1 || at < matchAt)) {
          matchAt = at;
          matchLen = secret.length;
        }
      }
      // A complete match before the held-back tail is final: nothing earlier can still grow.
      if (matchAt !== -1 && matchAt < hold) {
        if (matchAt > pos) this.emit(data.subarray(pos, matchAt));
        this.emit(this.marker);
        pos = matchAt + matchLen;
        continue;
      }
      if (hold > pos) this.emit(data.subarray(pos, hold));
      if (hold < end) this.pending = Buffer.from(data.subarray(hold));
      return;
    }
  }

  /** Start of the longest tail of data (from `from`) that is a proper prefix of some secret; data.length if none. */
  private holdStart(data: Buffer, from: number): number {
    const end = data.length;
    for (let p = Math.max(from, end - this.maxLen + 1); p < end; p++) {
      const tailLen = end - p;
      for (const secret of this.secrets) {
        if (secret.length > tailLen && secret[0] === data[p] && data.compare(secret, 0, tailLen, p, end) === 0) return p;
      }
    }
    return end;
  }
}
