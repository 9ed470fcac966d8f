// Why a command's network request failed, told to the agent: HTTPS clients show only "CONNECT
// tunnel failed, response 403" and never the proxy's explanation, so a failed command (or task)
// whose sandbox's egress proxy refused destinations while it ran carries a note naming them. The
// refusals come from the keeper's record (denial-log.ts), chosen by their time, so the note does
// not disturb the DenialReporter's offsets (the server's log still hears each refusal once). The
// host names come from inside the sandbox: the tools mask the note like the command's output.
import { readDenials } from './denial-log.js';

/** Most host names one note lists; the rest are counted. */
const HOSTS_SHOWN_MAX = 5;
/** The denial file stops growing at 256 KiB (denial-log.ts); reading stops a little after that. */
const READ_MAX_BYTES = 320 * 1024;

/**
 * The distinct hosts the sandbox's egress proxy refused at or after `sinceMs` and before
 * `untilMs` (epoch ms), in the order first refused, read from the sandbox's state directory
 * `dir`; [] when there are none or the record cannot be read. The keeper records a host at most
 * once a minute, so a host refused again within a minute of an earlier refusal is not seen here.
 */
export function hostsRefusedSince(dir: string, sinceMs: number, untilMs = Infinity): string[] {
  const hosts = new Set<string>();
  let offset = 0;
  try {
    while (offset < READ_MAX_BYTES) {
      const { records, next } = readDenials(dir, offset);
      for (const r of records) if (r.at >= sinceMs && r.at < untilMs) hosts.add(r.host);
      if (next === offset) break;
      offset = next;
    }
  } catch {
    // Only an explanation: a record that cannot be read gives none.
  }
  return [...hosts];
}

/**
 * The note for refused hosts (at least one): at most five named, the rest counted. A name the
 * keeper recorded with `?` for characters a host name cannot have is counted, never shown: masking
 * matches a secret's exact text, and such a name may hold a secret with a character replaced.
 */
export function egressRefusalNote(hosts: readonly string[]): string {
  const shown = hosts.filter((h) => !h.includes('?')).slice(0, HOSTS_SHOWN_MAX);
  const hidden = hosts.length - shown.length;
  const what =
    shown.length === 0 ? (hidden === 1 ? 'a host' : `${hidden} hosts`) : shown.join(', ') + (hidden > 0 ? ` and ${hidden} more` : '');
  return (
    `The sandbox's egress proxy refused ${what}: not on this sandbox's allow-list, or a name that resolves to a loopback, ` +
    'link-local or private address (the proxy answered 403, which HTTPS clients report as "CONNECT tunnel failed"). ' +
    'To reach them, create a sandbox whose network.allow_out names them, within what the server permits (--network-allow / SANDBOX_MCP_NETWORK_ALLOW).'
  );
}

/** The refusal note for what ran in the sandbox at `dir` from `sinceMs` (up to `untilMs`), as a list of 0 or 1 notes. */
export function egressRefusalNotes(dir: string, sinceMs: number, untilMs?: number): string[] {
  const hosts = hostsRefusedSince(dir, sinceMs, untilMs);
  return hosts.length > 0 ? [egressRefusalNote(hosts)] : [];
}
