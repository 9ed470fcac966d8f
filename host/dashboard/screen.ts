// Which requests may reach the dashboard at all, as one pure function (unit-tested like the bwrap
// argv builder), and the headers every dashboard response carries. Host must name this server
// (DNS rebinding), as for /mcp; an Origin, when sent, must be this server's, and a request that
// changes something must send one; a browser's Sec-Fetch-Site must say the request comes from
// this origin (or, for a page, from the address bar). Pages on other ports of this host are the
// same *site* to a browser (it sends them our cookie): `same-site` is refused too.
import type { IncomingHttpHeaders } from 'node:http';

/** Why a request was refused before any route ran; the status follows from it. */
export type ScreenRefusal = 'host' | 'origin' | 'cross_site';

/** What the screen looks at: the method and the headers. */
export interface ScreenedRequest {
  method: string;
  headers: IncomingHttpHeaders;
}

/** True for methods that change nothing (the only ones allowed without an Origin). */
export function isReadOnlyMethod(method: string): boolean {
  return method === 'GET' || method === 'HEAD';
}

/**
 * Undefined when `req` may proceed; else why not. `hosts` are the lowercase host:port names of
 * this server (transports/http.ts allowedHosts); `isApi` marks data (anything but the page and
 * its assets).
 */
export function screenRequest(req: ScreenedRequest, hosts: ReadonlySet<string>, isApi: boolean): ScreenRefusal | undefined {
  const host = (req.headers.host ?? '').toLowerCase();
  if (!hosts.has(host)) return 'host';
  const origin = req.headers.origin?.toLowerCase();
  const isOwnOrigin = origin !== undefined && [...hosts].some((h) => origin === `http://${h}`);
  if (origin !== undefined && !isOwnOrigin) return 'origin';
  if (!isReadOnlyMethod(req.method) && !isOwnOrigin) return 'origin';
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && !(site === 'none' && !isApi)) return 'cross_site';
  return undefined;
}

/**
 * The page's Content-Security-Policy: its own script and styles only (no inline script or style,
 * no eval), requests to itself only, no forms submitted anywhere, never framed.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers every dashboard response carries, data and pages alike. */
export const COMMON_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};
