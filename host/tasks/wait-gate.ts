// How many get_task calls may wait (long-poll) on one sandbox at once. Each holds a node process
// and its threads inside the sandbox for up to 30 s: unbounded, a client could fill the
// sandbox's memory and processes with waiting calls. One gate per server process.
import { ProviderError } from '../providers/provider-error.js';

/** Counts the waiting calls per sandbox and refuses the one beyond the maximum. */
export class WaitGate {
  private readonly waiting = new Map<string, number>();

  constructor(readonly maxPerSandbox: number) {}

  /** Counts one waiting call on `sandbox` (a qualified id); returns the function that ends it. Throws insufficient_resources at the maximum. */
  enter(sandbox: string): () => void {
    const n = this.waiting.get(sandbox) ?? 0;
    if (n >= this.maxPerSandbox) {
      throw new ProviderError('insufficient_resources', {
        code: 'wait_limit',
        detail:
          `At most ${this.maxPerSandbox} get_task calls may wait on one sandbox at once: call get_task with wait 0, or again once another returns ` +
          '(the limit is --max-waiting-gets or SANDBOX_MCP_MAX_WAITING_GETS).',
      });
    }
    this.waiting.set(sandbox, n + 1);
    let isDone = false;
    return () => {
      if (isDone) return;
      isDone = true;
      const left = (this.waiting.get(sandbox) ?? 1) - 1;
      if (left > 0) this.waiting.set(sandbox, left);
      else this.waiting.delete(sandbox);
    };
  }
}
