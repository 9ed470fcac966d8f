// Which sandboxes must outlive the session that created them: those a task was started in, by
// any session of this process. A start still in flight holds its sandbox too, and if that start
// then certainly failed, the sandbox is destroyed after all (the session no longer exists to).
// It also remembers, briefly, the tasks this process ran for calls that finished in time, which
// their agent removes just after answering: a session close's listing does not count them.

/**
 * How long a task noted as being removed is remembered: its agent removes it once its supervisor
 * has exited, well within this; one still listed later was not removed, and counts again.
 */
const REMOVING_FOR_MS = 60_000;

/** Process-wide task retention, shared by every session. */
export class TaskRetention {
  private readonly retained = new Set<string>();
  private readonly pending = new Map<string, number>();
  private readonly deferred = new Map<string, () => Promise<void>>();
  /** `qualifiedId task_id` → when it may be forgotten; in the order noted, so the oldest come first. */
  private readonly removing = new Map<string, number>();

  /** A start_task is about to submit work to this sandbox. */
  begin(qualifiedId: string): void {
    this.pending.set(qualifiedId, (this.pending.get(qualifiedId) ?? 0) + 1);
  }

  /**
   * The submission settled: `isHeld` when a task may exist (started, or outcome unknown). When the
   * last pending start settles without a task and a closed session deferred the destruction, it runs now.
   */
  async end(qualifiedId: string, isHeld: boolean): Promise<void> {
    if (isHeld) this.retained.add(qualifiedId);
    const left = (this.pending.get(qualifiedId) ?? 1) - 1;
    if (left > 0) return void this.pending.set(qualifiedId, left);
    this.pending.delete(qualifiedId);
    const destroy = this.deferred.get(qualifiedId);
    this.deferred.delete(qualifiedId);
    if (destroy && !this.retained.has(qualifiedId)) await destroy();
  }

  /**
   * At session close, for a sandbox the session owns: true when it may be destroyed now. A retained
   * sandbox is kept; one with a start in flight is kept until that start settles (see end()).
   */
  mayDestroy(qualifiedId: string, destroy: () => Promise<void>): boolean {
    if (this.retained.has(qualifiedId)) return false;
    if (this.pending.has(qualifiedId)) {
      this.deferred.set(qualifiedId, destroy);
      return false;
    }
    return true;
  }

  /**
   * A task nobody was given (a run_command that finished in time through a resident agent), which
   * its agent removes once the answer is out. Remembered for REMOVING_FOR_MS.
   */
  noteRemoving(qualifiedId: string, taskId: string, nowMs = Date.now()): void {
    for (const [key, untilMs] of this.removing) {
      if (untilMs > nowMs) break;
      this.removing.delete(key);
    }
    this.removing.set(`${qualifiedId} ${taskId}`, nowMs + REMOVING_FOR_MS);
  }

  /** True for a task noted by noteRemoving within REMOVING_FOR_MS. */
  isRemoving(qualifiedId: string, taskId: string, nowMs = Date.now()): boolean {
    return (this.removing.get(`${qualifiedId} ${taskId}`) ?? 0) > nowMs;
  }

  /** After kill_sandbox: nothing left to retain. */
  forget(qualifiedId: string): void {
    this.retained.delete(qualifiedId);
  }
}
