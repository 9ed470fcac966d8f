// The network of e2b sandboxes in E2B's own terms: a create's egress policy becomes the SDK's
// `allowInternetAccess` / `network.allowOut` + `denyOut` (E2B filters the traffic itself; no
// proxy, no variables), an exposed port is the SDK's public host for it, and the effective
// policy is read back from getInfo.
import { ALL_TRAFFIC, type Sandbox, type SandboxInfo, type SandboxOpts } from 'e2b';
import { ProviderError } from '../provider-error.js';
import { parseAllowList, type NetworkPolicy } from '../network-policy.js';
import type { ExposedPort, NetworkDescription, ReservedPorts } from '../provider.js';

/**
 * The port of an E2B sandbox that is ours: envd's (the SDK's `envdPort`, not exported), through
 * which this server runs commands and moves files; its host is the SDK's, never a sandbox's server.
 */
export const RESERVED_PORTS: ReservedPorts = { 49983: 'envd, through which the server runs commands and moves files' };

const PORTS_UNSUPPORTED =
  "E2B's egress allow-list names hosts and addresses, not ports: remove the :port from network.allow_out entries for e2b sandboxes (an entry without a port then allows every port of that host there).";

/**
 * Sandbox.create's options for `policy`: none (the default) keeps E2B's own (internet access);
 * an empty list denies all egress; a list allows exactly its hosts and denies everything else.
 * Throws unsupported for what E2B cannot express (an entry with a port).
 */
export function createNetworkOpts(policy: NetworkPolicy | undefined): Pick<SandboxOpts, 'allowInternetAccess' | 'network'> {
  if (policy === undefined) return {};
  if (policy.allowOut.length === 0) return { allowInternetAccess: false };
  const entries = parseAllowList(policy.allowOut);
  if (entries.some((e) => e.port !== null)) {
    throw new ProviderError('unsupported', { code: 'UnsupportedOption', detail: PORTS_UNSUPPORTED });
  }
  const allowOut = entries.map((e) => (e.kind === 'wildcard' ? `*.${e.host}` : e.host));
  // E2B lets allowed entries win over denied ones: denying all traffic leaves exactly the list.
  return { network: { allowOut, denyOut: [ALL_TRAFFIC] } };
}

/** The public URL of `port` on a connected sandbox: E2B's host for it, always HTTPS. */
export function exposedPort(sandbox: Sandbox, port: number): ExposedPort {
  return { url: `https://${sandbox.getHost(port)}/` };
}

/** A sandbox's egress as E2B reports it (getInfo); E2B has a URL for every port, so none are listed. */
export function describeNetwork(info: Pick<SandboxInfo, 'allowInternetAccess' | 'network'>): NetworkDescription {
  const allowOut = info.network?.allowOut ?? [];
  const deniesAll = info.allowInternetAccess === false || (info.network?.denyOut ?? []).includes(ALL_TRAFFIC);
  const egress = deniesAll ? (allowOut.length > 0 ? 'allow_out' : 'none') : 'provider_default';
  return { egress, allow_out: egress === 'allow_out' ? allowOut : [], proxy: null, exposed_ports: [] };
}
