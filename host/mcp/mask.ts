// Host-side masking of known secret values in text the server returns. Each sandbox's output is
// masked with the server's own secrets plus that sandbox's: the create envs and per-call envs seen
// by this process, and the secrets its own record holds (read once per process, so a restarted
// server masks them too). Keeping them per sandbox means one principal's secrets never shape
// another's output (masking there would confirm a guessed value). This is not general secret
// detection: encoded or partial values, and values split across pages, may remain.
import { SECRET_MARKER, LIMITS } from '../../shared/limits.js';
import { secretValuesOf } from '../config/config.js';

/** Sandboxes whose secrets are held at most; the oldest are dropped first (and read again when needed). */
const SANDBOXES_MAX = 10_000;

/** Known secret values: the server's, for all output, and each sandbox's, for that sandbox's output. */
export class SecretMasker {
  private readonly global: string[];
  private readonly perSandbox = new Map<string, { values: string[]; isLearned: boolean }>();
  private readonly learning = new Map<string, Promise<void>>();

  constructor(serverSecrets: Iterable<string> = []) {
    this.global = longestFirst(serverSecrets);
  }

  /** Adds values for one sandbox's output (too-short ones are ignored, as in the agent). */
  add(sandbox: string, values: Iterable<string>): void {
    const entry = this.entry(sandbox);
    entry.values = longestFirst([...entry.values, ...values]);
  }

  /**
   * Adds the secret-named variables of the sandbox's own record, once per process: `read` runs
   * only until it has succeeded (concurrent callers share one read; a failed read is retried).
   */
  async learn(sandbox: string, read: () => Promise<Record<string, string>>): Promise<void> {
    if (this.perSandbox.get(sandbox)?.isLearned) return;
    let pending = this.learning.get(sandbox);
    if (!pending) {
      pending = (async () => {
        const env = await read();
        this.add(sandbox, secretValuesOf(env));
        this.entry(sandbox).isLearned = true;
      })().finally(() => this.learning.delete(sandbox));
      this.learning.set(sandbox, pending);
    }
    await pending;
  }

  /** Marks a sandbox's record as known (this process created it and added its envs). */
  markLearned(sandbox: string): void {
    this.entry(sandbox).isLearned = true;
  }

  /** Drops a destroyed sandbox's values. */
  forget(sandbox: string): void {
    this.perSandbox.delete(sandbox);
  }

  /** Returns `text`, output of `sandbox`, with every known value replaced by the fixed marker. */
  mask(sandbox: string, text: string): string {
    const own = this.perSandbox.get(sandbox)?.values ?? [];
    // Longest first across both lists, so a secret containing another is masked whole.
    const values = own.length ? longestFirst([...this.global, ...own]) : this.global;
    let out = text;
    for (const v of values) if (out.includes(v)) out = out.split(v).join(SECRET_MARKER);
    return out;
  }

  private entry(sandbox: string): { values: string[]; isLearned: boolean } {
    let entry = this.perSandbox.get(sandbox);
    if (!entry) {
      entry = { values: [], isLearned: false };
      this.perSandbox.set(sandbox, entry);
      if (this.perSandbox.size > SANDBOXES_MAX) this.perSandbox.delete(this.perSandbox.keys().next().value!);
    }
    return entry;
  }
}

function longestFirst(values: Iterable<string>): string[] {
  const kept = new Set<string>();
  for (const v of values) if (Buffer.byteLength(v) >= LIMITS.secretMinBytes) kept.add(v);
  return [...kept].sort((a, b) => b.length - a.length);
}
