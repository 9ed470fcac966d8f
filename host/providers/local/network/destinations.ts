// Where an allowed request may go: the proxy resolves names on the host and refuses addresses an
// allowed name could be pointed at to reach this machine or its networks (loopback, link-local,
// private, and the other non-public ranges), unless an entry names that address literally. The
// connection is then made to the address checked here, never resolved again.
import { BlockList, isIPv4 } from 'node:net';
import { canonicalIPv6, entryAllows, namesAddressLiterally, requestHost, type AllowEntry } from '../../network-policy.js';

/** Why a request was refused; `not_listed` and `private_address` are the allow-list's own refusals. */
export type DenialReason = 'not_listed' | 'private_address' | 'unresolvable' | 'bad_host';

/** A destination the proxy may connect to (an address it checked), or why not (with the non-public address a name resolved to). */
export type Destination = { address: string; family: 4 | 6 } | { denied: DenialReason; address?: string };

/** Resolves a host name to all of its addresses (injectable for tests). */
export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

const NON_PUBLIC = new BlockList();
// prettier-ignore
for (const [net, prefix] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16],
  ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15],
  ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv4');
// prettier-ignore
for (const [net, prefix] of [
  // ::/96 holds ::, ::1 and the IPv4-compatible addresses; 64:ff9b:1::/48 is local-use NAT64; 2002::/16
  // (6to4) embeds an IPv4 address of any kind.
  ['::', 96], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['2001:db8::', 32], ['100::', 64],
  ['64:ff9b:1::', 48], ['2002::', 16],
] as const) NON_PUBLIC.addSubnet(net, prefix, 'ipv6');

/** The IPv4 address an IPv6 address carries (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::/96), else null. */
function embeddedIPv4(v6: string): string | null {
  const m = /^(?:::ffff:|64:ff9b::)(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/.exec(v6);
  if (!m) return null;
  if (m[1]) return m[1];
  const hi = parseInt(m[2]!, 16);
  const lo = parseInt(m[3]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet('169.254.0.0', 16, 'ipv4');
LINK_LOCAL.addSubnet('fe80::', 10, 'ipv6');
const PRIVATE = new BlockList();
// prettier-ignore
for (const [net, prefix] of [['10.0.0.0', 8], ['172.16.0.0', 12], ['192.168.0.0', 16], ['100.64.0.0', 10]] as const) PRIVATE.addSubnet(net, prefix, 'ipv4');
PRIVATE.addSubnet('fc00::', 7, 'ipv6');

/** What kind of non-public address `address` (canonical) is, in words a refusal can use. */
export function nonPublicKind(address: string): 'loopback' | 'link-local' | 'private' | 'reserved' {
  const v4 = isIPv4(address) ? address : embeddedIPv4(address);
  const [text, type] = v4 !== null ? [v4, 'ipv4' as const] : [address, 'ipv6' as const];
  if (LOOPBACK.check(text, type)) return 'loopback';
  if (LINK_LOCAL.check(text, type)) return 'link-local';
  if (PRIVATE.check(text, type)) return 'private';
  return 'reserved';
}

/** True for loopback, link-local, private, shared, documentation, multicast and reserved addresses. */
export function isNonPublicAddress(address: string, family: 4 | 6): boolean {
  if (family === 4) return NON_PUBLIC.check(address, 'ipv4');
  const v4 = embeddedIPv4(address);
  return v4 !== null ? NON_PUBLIC.check(v4, 'ipv4') : NON_PUBLIC.check(address, 'ipv6');
}

// node:dns is loaded on first use, like node:http in egress-proxy.ts: keepers without a proxy never need it.
const systemResolver: Resolver = async (host) => (await import('node:dns/promises')).lookup(host, { all: true, verbatim: true });

/** A request's host, normalised (requestHost), that an entry allows on its port. */
export type ListedHost = { host: string; kind: 'name' | 'ipv4' | 'ipv6' };

/** The first check, without resolving anything: the host as an entry reads it, or why no entry allows it on `port`. */
export function checkListed(
  entries: readonly AllowEntry[],
  hostText: string,
  port: number,
): ListedHost | { denied: 'bad_host' | 'not_listed' } {
  const host = requestHost(hostText);
  if (!host) return { denied: 'bad_host' };
  if (!entries.some((e) => entryAllows(e, host, port))) return { denied: 'not_listed' };
  return host;
}

/**
 * Where a listed host may connect: an address named literally is used as it is; a name is
 * resolved here and its first address that is public — or that an entry names literally — is
 * chosen, else the request is refused (naming the first non-public address found).
 */
export async function resolveListed(
  entries: readonly AllowEntry[],
  host: ListedHost,
  port: number,
  resolve: Resolver = systemResolver,
): Promise<{ address: string; family: 4 | 6 } | { denied: 'private_address' | 'unresolvable'; address?: string }> {
  if (host.kind !== 'name') return { address: host.host, family: host.kind === 'ipv4' ? 4 : 6 };
  let addresses: { address: string; family: number }[];
  try {
    addresses = await resolve(host.host);
  } catch {
    return { denied: 'unresolvable' };
  }
  let nonPublic: string | undefined;
  for (const a of addresses) {
    const family = a.family === 6 ? 6 : 4;
    const address = family === 6 ? canonicalIPv6(a.address) : a.address;
    if (address === null) continue;
    if (!isNonPublicAddress(address, family) || namesAddressLiterally(entries, address, port)) return { address, family };
    nonPublic ??= address;
  }
  return nonPublic !== undefined ? { denied: 'private_address', address: nonPublic } : { denied: 'unresolvable' };
}

/** Decides where a request for `hostText`:`port` may connect: nowhere unless an entry allows it (checkListed), then resolveListed. */
export async function resolveDestination(
  entries: readonly AllowEntry[],
  hostText: string,
  port: number,
  resolve: Resolver = systemResolver,
): Promise<Destination> {
  const host = checkListed(entries, hostText, port);
  return 'denied' in host ? host : resolveListed(entries, host, port, resolve);
}
