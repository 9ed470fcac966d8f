// The dashboard's access rules as pure functions with exact expectations: which requests the
// screen lets through (Host, Origin, Sec-Fetch-Site), the session cookie's attributes, sessions
// needing both cookie and CSRF token, one-time codes working once and expiring, and the sign-in
// limiter. Time is injected.
import { describe, expect, it } from 'vitest';
import { OPERATOR, type Principal } from '../../host/access/principal.js';
import { STATUS_BY_CATEGORY } from '../../host/dashboard/api.js';
import { listedProviders } from '../../host/dashboard/overview.js';
import { COMMON_HEADERS, screenRequest } from '../../host/dashboard/screen.js';
import {
  clearedCookie,
  cookieName,
  OneTimeCode,
  readCookie,
  sessionCookie,
  SessionStore,
  SignInLimiter,
} from '../../host/dashboard/sessions.js';
import { allowedHosts } from '../../host/mcp/transports/http.js';
import { ERROR_CATEGORIES } from '../../host/providers/provider-error.js';

const HOSTS = allowedHosts('127.0.0.1', 8765);
const OWN = 'http://127.0.0.1:8765';
const screen = (method: string, headers: Record<string, string>, isApi = true) => screenRequest({ method, headers }, HOSTS, isApi);

describe('the dashboard screen', () => {
  it('lets through what its own page sends: reads, and changes with its Origin', () => {
    expect(screen('GET', { host: '127.0.0.1:8765' })).toBeUndefined();
    expect(screen('GET', { host: 'localhost:8765', 'sec-fetch-site': 'same-origin' })).toBeUndefined();
    expect(screen('POST', { host: '127.0.0.1:8765', origin: OWN, 'sec-fetch-site': 'same-origin' })).toBeUndefined();
    expect(screen('DELETE', { host: '[::1]:8765', origin: 'http://[::1]:8765' })).toBeUndefined();
    // A page typed into the address bar.
    expect(screen('GET', { host: '127.0.0.1:8765', 'sec-fetch-site': 'none' }, false)).toBeUndefined();
  });

  it('refuses a Host that is not this server (DNS rebinding)', () => {
    expect(screen('GET', { host: 'evil.example:8765' })).toBe('host');
    expect(screen('GET', { host: '127.0.0.1:9999' })).toBe('host');
    expect(screen('GET', {})).toBe('host');
  });

  it('refuses a foreign Origin on any request, and a change without an Origin', () => {
    expect(screen('GET', { host: '127.0.0.1:8765', origin: 'http://evil.example' })).toBe('origin');
    // Another port of this host is another origin.
    expect(screen('GET', { host: '127.0.0.1:8765', origin: 'http://127.0.0.1:9999' })).toBe('origin');
    expect(screen('POST', { host: '127.0.0.1:8765' })).toBe('origin');
    expect(screen('POST', { host: '127.0.0.1:8765', origin: 'null' })).toBe('origin');
  });

  it('refuses what a browser says came from elsewhere: another site, another port of this host, a typed URL to the API', () => {
    expect(screen('GET', { host: '127.0.0.1:8765', 'sec-fetch-site': 'cross-site' })).toBe('cross_site');
    expect(screen('GET', { host: '127.0.0.1:8765', 'sec-fetch-site': 'same-site' })).toBe('cross_site');
    expect(screen('GET', { host: '127.0.0.1:8765', 'sec-fetch-site': 'same-site' }, false)).toBe('cross_site');
    expect(screen('GET', { host: '127.0.0.1:8765', 'sec-fetch-site': 'none' }, true)).toBe('cross_site');
  });

  it('sends a strict CSP and no-framing, no-sniffing, no-caching headers with every answer', () => {
    expect(COMMON_HEADERS['content-security-policy']).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    );
    expect(COMMON_HEADERS).toMatchObject({ 'x-frame-options': 'DENY', 'x-content-type-options': 'nosniff', 'cache-control': 'no-store' });
  });
});

describe('dashboard sessions', () => {
  const alice: Principal = { kind: 'named', name: 'alice', role: 'user' };

  it('names the cookie by port, HttpOnly and SameSite=Strict, and reads it back among others', () => {
    expect(sessionCookie(8765, 'abc', 60)).toBe('sandbox_mcp_session_8765=abc; HttpOnly; SameSite=Strict; Path=/; Max-Age=60');
    expect(clearedCookie(8765)).toContain('Max-Age=0');
    expect(readCookie(`a=1; ${cookieName(8765)}=v1; ${cookieName(9999)}=v2`, 8765)).toBe('v1');
    expect(readCookie(`${cookieName(9999)}=v2`, 8765)).toBeUndefined();
    expect(readCookie(undefined, 8765)).toBeUndefined();
  });

  it('needs the cookie and its CSRF token together, until it expires or is closed', () => {
    let now = 1_000_000;
    const store = new SessionStore(60_000, () => now);
    const a = store.open(alice);
    const b = store.open(OPERATOR);
    expect(store.check(a.cookie, a.csrf)).toEqual({ principal: alice });
    expect(store.check(b.cookie, b.csrf)).toEqual({ principal: OPERATOR });
    expect(store.check(a.cookie, undefined)).toEqual({ refusal: 'bad_csrf' });
    expect(store.check(a.cookie, b.csrf)).toEqual({ refusal: 'bad_csrf' });
    expect(store.check(undefined, a.csrf)).toEqual({ refusal: 'no_session' });
    expect(store.check('forged', a.csrf)).toEqual({ refusal: 'no_session' });
    store.close(b.cookie);
    expect(store.check(b.cookie, b.csrf)).toEqual({ refusal: 'no_session' });
    now += 60_000;
    expect(store.check(a.cookie, a.csrf)).toEqual({ refusal: 'no_session' });
    expect(a.maxAgeS).toBe(60);
  });

  it('lets a one-time code sign in once, only within its lifetime, and only the newest one', () => {
    let now = 0;
    const codes = new OneTimeCode(600_000, () => now);
    const first = codes.issue();
    expect(codes.redeem('guess')).toBe(false);
    expect(codes.redeem(first)).toBe(true);
    expect(codes.redeem(first)).toBe(false);
    const second = codes.issue();
    const third = codes.issue();
    expect(codes.redeem(second)).toBe(false);
    now = 600_000;
    expect(codes.redeem(third)).toBe(false);
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('refuses sign-ins for the rest of a minute after ten failures', () => {
    let now = 0;
    const limiter = new SignInLimiter(10, () => now);
    for (let i = 0; i < 10; i++) {
      expect(limiter.isBlocked()).toBe(false);
      limiter.fail();
    }
    expect(limiter.isBlocked()).toBe(true);
    now = 59_999;
    expect(limiter.isBlocked()).toBe(true);
    now = 60_000;
    expect(limiter.isBlocked()).toBe(false);
  });
});

describe('the dashboard API', () => {
  it('gives every error category an HTTP status; the provider credentials failing is never 401 (that would sign the page out)', () => {
    expect(Object.keys(STATUS_BY_CATEGORY).sort()).toEqual([...ERROR_CATEGORIES].sort());
    expect(STATUS_BY_CATEGORY.authentication).not.toBe(401);
    expect(STATUS_BY_CATEGORY.not_found).toBe(404);
  });

  it('lists the default provider, and E2B beside local sandboxes when a key for it is configured', () => {
    expect(listedProviders({ defaultProvider: 'local', e2b: {} })).toEqual(['local']);
    expect(listedProviders({ defaultProvider: 'local', e2b: { apiKey: 'k' } })).toEqual(['local', 'e2b']);
    expect(listedProviders({ defaultProvider: 'e2b', e2b: { apiKey: 'k' } })).toEqual(['e2b']);
  });
});
