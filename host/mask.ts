// Host-side masking of known secret values in text the server returns. This is not general
// secret detection: encoded or partial values, and values split across pages, may remain.
import { SECRET_MARKER, LIMITS } from '../shared/limits.js';

/** A growing set of exact secret values, masked in every page of output the host returns. */
export class SecretMasker {
  private values: string[] = [];

  constructor(initial: Iterable<string> = []) {
    this.add(initial);
  }

  /** Adds values (too-short ones are ignored, as in the agent). */
  add(values: Iterable<string>): void {
    const all = new Set(this.values);
    for (const v of values) if (Buffer.byteLength(v) >= LIMITS.secretMinBytes) all.add(v);
    // Longest first, so a secret containing another is masked whole.
    this.values = [...all].sort((a, b) => b.length - a.length);
  }

  /** Returns `text` with every known value replaced by the fixed marker. */
  mask(text: string): string {
    let out = text;
    for (const v of this.values) if (out.includes(v)) out = out.split(v).join(SECRET_MARKER);
    return out;
  }
}
