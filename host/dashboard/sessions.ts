// How a browser signs in to the dashboard and stays signed in: a token (or `sandbox-mcp
// dashboard`'s one-time code) posted once becomes an HttpOnly, SameSite=Strict session cookie
// plus a CSRF token the page keeps in origin-scoped storage and sends as a header on every call.
// The cookie alone is worth nothing: browsers send it to pages on any port of this host. Only
// hashes of cookies, CSRF tokens and codes are kept, in memory (a restart signs everyone out).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Principal } from '../access/principal.js';

/** The header every API call carries the CSRF token in. */
export const CSRF_HEADER = 'x-sandbox-mcp-csrf';

/** How long a dashboard session lasts. */
export const SESSION_LIFETIME_MS = 12 * 3600_000;
/** How long a one-time sign-in code works. */
export const ONE_TIME_CODE_LIFETIME_MS = 10 * 60_000;
/** Failed sign-ins per minute, server-wide, before the rest are refused for that minute. */
export const SIGN_IN_FAILURES_PER_MINUTE = 10;
/** Sessions held at most; the oldest go first. */
const MAX_SESSIONS = 1000;

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();
const secret = (): string => randomBytes(32).toString('base64url');

/** The session cookie's name: with the port, since cookies are per host, not per port. */
export function cookieName(port: number): string {
  return `sandbox_mcp_session_${port}`;
}

/**
 * Set-Cookie for a new session: HttpOnly (no script reads it), SameSite=Strict, the whole site, a
 * bounded life. Not Secure (this is plain http on loopback; `__Host-` would need Secure).
 */
export function sessionCookie(port: number, value: string, maxAgeS: number): string {
  return `${cookieName(port)}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeS}`;
}

/** Set-Cookie that removes the session cookie. */
export function clearedCookie(port: number): string {
  return `${cookieName(port)}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0`;
}

/** The session cookie's value in a Cookie header, or undefined. */
export function readCookie(header: string | undefined, port: number): string | undefined {
  const prefix = `${cookieName(port)}=`;
  for (const part of (header ?? '').split(';')) {
    const p = part.trim();
    if (p.startsWith(prefix)) return p.slice(prefix.length) || undefined;
  }
  return undefined;
}

/** Why an API call has no session: no (live) cookie, or no matching CSRF header. */
export type SessionRefusal = 'no_session' | 'bad_csrf';

interface StoredSession {
  principal: Principal;
  csrfHash: Buffer;
  expiresAtMs: number;
}

/** The signed-in browsers, keyed by their cookie's hash. */
export class SessionStore {
  private readonly sessions = new Map<string, StoredSession>();

  constructor(
    private readonly lifetimeMs = SESSION_LIFETIME_MS,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** A new session of `principal`: the cookie's value and the CSRF token (each shown once). */
  open(principal: Principal): { cookie: string; csrf: string; maxAgeS: number } {
    const now = this.nowMs();
    for (const [key, s] of this.sessions) if (s.expiresAtMs <= now) this.sessions.delete(key);
    if (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const cookie = secret();
    const csrf = secret();
    this.sessions.set(sha256(cookie).toString('hex'), { principal, csrfHash: sha256(csrf), expiresAtMs: now + this.lifetimeMs });
    return { cookie, csrf, maxAgeS: Math.floor(this.lifetimeMs / 1000) };
  }

  /** The principal of a call carrying session cookie `cookie` and CSRF header `csrf`: both are required. */
  check(cookie: string | undefined, csrf: string | undefined): { principal: Principal } | { refusal: SessionRefusal } {
    const session = cookie === undefined ? undefined : this.sessions.get(sha256(cookie).toString('hex'));
    if (!session || session.expiresAtMs <= this.nowMs()) return { refusal: 'no_session' };
    if (csrf === undefined || !timingSafeEqual(sha256(csrf), session.csrfHash)) return { refusal: 'bad_csrf' };
    return { principal: session.principal };
  }

  /** Ends the session of `cookie` (sign-out). */
  close(cookie: string | undefined): void {
    if (cookie !== undefined) this.sessions.delete(sha256(cookie).toString('hex'));
  }
}

/**
 * The one-time sign-in code of `sandbox-mcp dashboard`, printed in a link's fragment (#code=…,
 * which browsers never send): it signs in one browser once, within its lifetime, then is spent.
 * Issuing a new one ends the old one.
 */
export class OneTimeCode {
  private hash: Buffer | undefined;
  private expiresAtMs = 0;

  constructor(
    private readonly lifetimeMs = ONE_TIME_CODE_LIFETIME_MS,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** A fresh code; the previous one stops working. */
  issue(): string {
    const code = secret();
    this.hash = sha256(code);
    this.expiresAtMs = this.nowMs() + this.lifetimeMs;
    return code;
  }

  /** True once for the current code within its lifetime (then it is spent). */
  redeem(code: string): boolean {
    if (!this.hash || this.nowMs() >= this.expiresAtMs) return false;
    const isMatch = timingSafeEqual(sha256(code), this.hash);
    if (isMatch) this.hash = undefined;
    return isMatch;
  }
}

/**
 * Counts failed sign-ins per minute, server-wide: tokens are unguessable, but a flood of guesses need
 * not reach the log. Past the maximum a wrong attempt is answered 429 unlogged; right credentials
 * are checked first and always sign in.
 */
export class SignInLimiter {
  private windowStartMs = Number.NEGATIVE_INFINITY;
  private failures = 0;

  constructor(
    private readonly maxPerMinute = SIGN_IN_FAILURES_PER_MINUTE,
    private readonly nowMs: () => number = Date.now,
  ) {}

  /** True while this minute's failures reached the maximum. */
  isBlocked(): boolean {
    if (this.nowMs() - this.windowStartMs >= 60_000) {
      this.windowStartMs = this.nowMs();
      this.failures = 0;
    }
    return this.failures >= this.maxPerMinute;
  }

  /** Counts one failed sign-in. */
  fail(): void {
    this.isBlocked();
    this.failures++;
  }
}
