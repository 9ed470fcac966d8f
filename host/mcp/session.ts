// One MCP session's state: its default sandbox and the sandboxes it owns (created here) with
// their renewal durations. Sandboxes merely inspected or referenced by explicit id are never
// adopted. Which owned sandboxes survive the session is TaskRetention's business (process-wide).

/** What a session knows about a sandbox it created. */
interface OwnedSandbox {
  /** Seconds each ordinary exec/file tool renews the lifetime to. */
  renewS: number;
}

/** What a session tells its client beyond the tools' results. */
export interface SessionOpts {
  /**
   * Each create_sandbox result says, in its text, that the sandbox ends with the session: set for
   * stdio sessions that destroy their sandboxes, since a client that starts a server per call
   * ends the session right after the call.
   */
  hasCleanupNote?: boolean;
}

/** Per-session ownership, default selection and renewal policy. */
export class Session {
  defaultSandbox: string | undefined;
  private readonly owned = new Map<string, OwnedSandbox>();
  private hasCloseBegun = false;

  constructor(readonly opts: SessionOpts = {}) {}

  /** True once close() began; late completions must not restore anything. */
  get isClosed(): boolean {
    return this.hasCloseBegun;
  }

  /** Records a sandbox created in this session and makes it the default. False if the session already closed. */
  adopt(qualifiedId: string, renewS: number): boolean {
    if (this.hasCloseBegun) return false;
    this.owned.set(qualifiedId, { renewS });
    this.defaultSandbox = qualifiedId;
    return true;
  }

  /** The renewal duration for a session-owned sandbox, or undefined (not ours, or session closed). */
  renewalFor(qualifiedId: string): number | undefined {
    return this.hasCloseBegun ? undefined : this.owned.get(qualifiedId)?.renewS;
  }

  /** After a successful set_sandbox_timeout: later renewals use this duration (owned sandboxes only). */
  setRenewal(qualifiedId: string, renewS: number): void {
    const entry = this.hasCloseBegun ? undefined : this.owned.get(qualifiedId);
    if (entry) entry.renewS = renewS;
  }

  /** After kill_sandbox: forget it, and clear the default if it was the default. */
  forget(qualifiedId: string): void {
    this.owned.delete(qualifiedId);
    if (this.defaultSandbox === qualifiedId) this.defaultSandbox = undefined;
  }

  /** Ends the session; returns the sandboxes it owned, for the caller to destroy unless retained. */
  close(): string[] {
    this.hasCloseBegun = true;
    const toKill = [...this.owned.keys()];
    this.owned.clear();
    this.defaultSandbox = undefined;
    return toKill;
  }
}
