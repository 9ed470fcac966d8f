// What an egress allow-list is, once for the tools, the configuration and both providers: the
// grammar of an entry (a host name, `*.suffix`, or an IPv4/[IPv6] address, with an optional
// port), which requests an entry lets through, and when one list permits another. Entries travel
// between the parts in their canonical text (formatAllowEntry), so every part parses them here.
import { isIPv4, isIPv6 } from 'node:net';

/** One parsed allow-list entry. */
export interface AllowEntry {
  /** Lower-case host name, the suffix of a wildcard (without `*.`), or a canonical address (IPv6 without brackets). */
  host: string;
  kind: 'name' | 'wildcard' | 'ipv4' | 'ipv6';
  /** The one port allowed, or null for the web ports (DEFAULT_PORTS). */
  port: number | null;
}

/** The ports an entry without a port allows: plain HTTP and HTTPS. */
export const DEFAULT_PORTS: readonly number[] = [80, 443];

/** The longest entry text accepted (a 253-byte name, `*.`, `:65535`). */
export const ALLOW_ENTRY_MAX_CHARS = 262;

/** The most entries one allow-list may hold. */
export const ALLOW_LIST_MAX_ENTRIES = 64;

/** The egress a sandbox is created with: the destinations it may reach through its proxy; none when empty. */
export interface NetworkPolicy {
  /** Canonical entries (formatAllowEntry); empty means no network beyond the sandbox's own loopback. */
  allowOut: readonly string[];
}

/** The policy that allows nothing. */
export const NO_EGRESS: NetworkPolicy = { allowOut: [] };

/**
 * Named lists a person may put in the server's permitted set instead of spelling them out:
 * `@packages` is what pip, npm/yarn, cargo, go, gem and `git clone` from GitHub fetch from;
 * `@debian` is what apt-get fetches from in a template built by `template build` (Debian's
 * mirror network and its security archive, mmdebstrap's default sources).
 */
export const ALLOW_LIST_PRESETS: Readonly<Record<string, readonly string[]>> = {
  '@packages': [
    'pypi.org',
    'files.pythonhosted.org',
    'registry.npmjs.org',
    'registry.yarnpkg.com',
    'github.com',
    'codeload.github.com',
    'objects.githubusercontent.com',
    'raw.githubusercontent.com',
    'crates.io',
    'index.crates.io',
    'static.crates.io',
    'proxy.golang.org',
    'sum.golang.org',
    'rubygems.org',
    'index.rubygems.org',
  ],
  '@debian': ['deb.debian.org', 'security.debian.org'],
};

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const DECIMAL_OCTET = /^(0|[1-9][0-9]{0,2})$/;

/** A lower-case DNS name of valid labels whose last label is not all digits (that would read as an address). */
function isHostName(name: string): boolean {
  if (name.length === 0 || name.length > 253) return false;
  const labels = name.split('.');
  return labels.every((l) => LABEL.test(l)) && !/^[0-9]+$/.test(labels[labels.length - 1]!);
}

/** A dotted-quad IPv4 address in canonical form (no leading zeros, no short forms). */
function isCanonicalIPv4(text: string): boolean {
  const parts = text.split('.');
  return parts.length === 4 && parts.every((p) => DECIMAL_OCTET.test(p) && Number(p) <= 255) && isIPv4(text);
}

/** The canonical (compressed, lower-case) form of an IPv6 address, or null. */
export function canonicalIPv6(text: string): string | null {
  if (!isIPv6(text) || text.includes('%')) return null;
  try {
    return new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
}

function parsePort(text: string): number | null {
  if (!/^[1-9][0-9]{0,4}$/.test(text)) return null;
  const port = Number(text);
  return port <= 65535 ? port : null;
}

/** Parses one entry (`pypi.org`, `*.example.com:8443`, `127.0.0.1:8080`, `[::1]:80`); null when it is not one. */
export function parseAllowEntry(text: string): AllowEntry | null {
  if (typeof text !== 'string' || text.length === 0 || text.length > ALLOW_ENTRY_MAX_CHARS) return null;
  let hostText: string;
  let port: number | null = null;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) return null;
    hostText = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) return null;
      port = parsePort(rest.slice(1));
      if (port === null) return null;
    }
    const v6 = canonicalIPv6(hostText);
    return v6 === null ? null : { host: v6, kind: 'ipv6', port };
  }
  const colon = text.lastIndexOf(':');
  if (colon >= 0) {
    port = parsePort(text.slice(colon + 1));
    if (port === null) return null;
    hostText = text.slice(0, colon);
  } else hostText = text;
  const host = hostText.toLowerCase();
  if (isCanonicalIPv4(host)) return { host, kind: 'ipv4', port };
  if (host.startsWith('*.')) return isHostName(host.slice(2)) ? { host: host.slice(2), kind: 'wildcard', port } : null;
  return isHostName(host) ? { host, kind: 'name', port } : null;
}

/** The canonical text of an entry; parseAllowEntry(formatAllowEntry(e)) equals e. */
export function formatAllowEntry(e: AllowEntry): string {
  const host = e.kind === 'ipv6' ? `[${e.host}]` : e.kind === 'wildcard' ? `*.${e.host}` : e.host;
  return e.port === null ? host : `${host}:${e.port}`;
}

/** Parses a list of canonical or user-written entries; throws on the first that is not one (callers validated them). */
export function parseAllowList(texts: readonly string[]): AllowEntry[] {
  return texts.map((t) => {
    const e = parseAllowEntry(t);
    if (!e) throw new Error('invalid allow-list entry');
    return e;
  });
}

/** The ports an entry allows. */
export function entryPorts(e: AllowEntry): readonly number[] {
  return e.port === null ? DEFAULT_PORTS : [e.port];
}

/**
 * How a request names its destination, normalised the way entries are: a canonical address, or a
 * lower-case host name without a trailing dot; null when it is neither (the request is refused).
 */
export function requestHost(text: string): { host: string; kind: 'name' | 'ipv4' | 'ipv6' } | null {
  let host = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const v6 = canonicalIPv6(host);
  if (v6 !== null) return { host: v6, kind: 'ipv6' };
  host = host.toLowerCase().replace(/\.$/, '');
  if (isCanonicalIPv4(host)) return { host, kind: 'ipv4' };
  return isHostName(host) ? { host, kind: 'name' } : null;
}

/** True when `entry` lets a request for `host` (normalised by requestHost) through on `port`. */
export function entryAllows(entry: AllowEntry, host: { host: string; kind: string }, port: number): boolean {
  if (!entryPorts(entry).includes(port)) return false;
  switch (entry.kind) {
    case 'name':
    case 'ipv4':
    case 'ipv6':
      return host.kind === entry.kind && host.host === entry.host;
    case 'wildcard':
      // Subdomains at any depth, never the apex (as E2B's allowOut reads `*.suffix`).
      return host.kind === 'name' && host.host.endsWith(`.${entry.host}`);
  }
}

/** True when some entry names the address `address` (canonical) literally, on `port`. */
export function namesAddressLiterally(entries: readonly AllowEntry[], address: string, port: number): boolean {
  return entries.some((e) => (e.kind === 'ipv4' || e.kind === 'ipv6') && e.host === address && entryPorts(e).includes(port));
}

/** True when `outer` allows every host that `inner` names (ports aside). */
function hostCovers(outer: AllowEntry, inner: AllowEntry): boolean {
  if (outer.kind === 'wildcard') {
    if (inner.kind === 'name') return inner.host.endsWith(`.${outer.host}`);
    if (inner.kind === 'wildcard') return inner.host === outer.host || inner.host.endsWith(`.${outer.host}`);
    return false;
  }
  return outer.kind === inner.kind && outer.host === inner.host;
}

/** True when every destination `entry` allows is allowed by some entry of `permitted`. */
export function isPermitted(entry: AllowEntry, permitted: readonly AllowEntry[]): boolean {
  return entryPorts(entry).every((port) => permitted.some((p) => entryPorts(p).includes(port) && hostCovers(p, entry)));
}

/**
 * Expands presets (`@packages`) and canonicalises a person-written list (flag or environment);
 * returns the index of the first invalid item instead when there is one. Duplicates are dropped.
 */
export function expandAllowList(items: readonly string[]): { entries: string[] } | { invalidIndex: number } {
  const out = new Set<string>();
  for (const [i, raw] of items.entries()) {
    const item = raw.trim();
    const preset = ALLOW_LIST_PRESETS[item];
    if (preset) {
      for (const p of preset) out.add(p);
      continue;
    }
    const e = parseAllowEntry(item);
    if (!e) return { invalidIndex: i };
    out.add(formatAllowEntry(e));
  }
  return { entries: [...out] };
}
