// Why a command's network request failed, told to the agent: HTTPS clients show only "CONNECT
// tunnel failed, response 403" (or 502) and never the proxy's explanation, so a failed command (or
// task) whose sandbox's egress proxy refused a destination, or could not reach an allowed one,
// while it ran carries notes saying which, and why. The failures come from the keeper's memory
// (every failure, asked over its control socket) and from its file (failure-log.ts, once a minute
// per destination: what the memory no longer holds), chosen by their time, so the notes do not
// disturb the FailureReporter's offsets. The host names come from inside the sandbox: the tools
// mask the notes like the command's output.
import { controlSocketPath, requestFailures } from './control-channel.js';
import { nonPublicKind } from './destinations.js';
import { failureKey, isRefusal, type EgressFailureReason, type EgressFailureRecord } from './egress-failures.js';
import { readFailures } from './failure-log.js';
import type { LiveSandbox } from '../sandbox/registry.js';

/** Most destinations one note lists; the rest are counted. */
const SHOWN_MAX = 5;
/** The failure file stops growing at 256 KiB (failure-log.ts); reading stops a little after that. */
const READ_MAX_BYTES = 320 * 1024;
/** Where the allow-list is decided (named in every refusal note). */
const SETTING =
  'create a sandbox whose network.allow_out names them, within what the server permits (--network-allow / SANDBOX_MCP_NETWORK_ALLOW)';

/** The distinct failures the file in `dir` records at or after `sinceMs` and before `untilMs` (epoch ms); [] when it cannot be read. */
export function failuresInFile(dir: string, sinceMs: number, untilMs = Infinity): EgressFailureRecord[] {
  const out: EgressFailureRecord[] = [];
  let offset = 0;
  try {
    while (offset < READ_MAX_BYTES) {
      const { records, next } = readFailures(dir, offset);
      for (const r of records) if (r.at >= sinceMs && r.at < untilMs) out.push(r);
      if (next === offset) break;
      offset = next;
    }
  } catch {
    // Only an explanation: a record that cannot be read gives none.
  }
  return out;
}

/**
 * The failures of the egress proxy of the sandbox at `dir` (its keeper: `keeperPid`) from
 * `sinceMs` up to `untilMs`, one per destination and reason, in the order they happened: the
 * keeper's memory merged with its file. [] when there are none or neither can be read.
 */
export async function failuresBetween(dir: string, keeperPid: number, sinceMs: number, untilMs?: number): Promise<EgressFailureRecord[]> {
  const remembered = (await requestFailures(controlSocketPath(dir, keeperPid), sinceMs, untilMs).catch(() => null)) ?? [];
  const byKey = new Map<string, EgressFailureRecord>();
  for (const r of [...failuresInFile(dir, sinceMs, untilMs), ...remembered]) {
    const known = byKey.get(failureKey(r));
    if (!known || r.at > known.at) byKey.set(failureKey(r), r);
  }
  return [...byKey.values()].sort((a, b) => a.at - b.at);
}

/** `host:port` as a note shows it (port 0: an older keeper did not record it). */
function destination(r: EgressFailureRecord): string {
  return r.port > 0 ? `${r.host}:${r.port}` : r.host;
}

/** An address with its port, as an allow-list entry writes it. */
function addressEntry(address: string, port: number): string {
  return `${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/**
 * Lists up to five of `records` as `describe` writes them; the rest counted. A host the keeper
 * recorded with `?` for characters a host name cannot have is counted, never shown: masking matches
 * a secret's exact text, and such a name may hold a secret with a character replaced.
 */
function listed(records: readonly EgressFailureRecord[], describe: (r: EgressFailureRecord) => string): string {
  const shown = records.filter((r) => !r.host.includes('?')).slice(0, SHOWN_MAX);
  const hidden = records.length - shown.length;
  if (shown.length === 0) return hidden === 1 ? 'a host' : `${hidden} hosts`;
  return shown.map(describe).join(', ') + (hidden > 0 ? ` and ${hidden} more` : '');
}

/** What happened to an allowed destination out of reach, in a few words. */
const UNREACHABLE_WHAT: Partial<Record<EgressFailureReason, string>> = {
  unresolvable: 'the name does not resolve on the host',
  connection_refused: 'connection refused',
  timeout: 'no connection or answer in time',
  unreachable: 'no route from the host',
  upstream_error: 'closed or broke the connection without a valid answer',
};

/** The notes for `records` (failures of one command or task): one per kind of failure, [] when none. */
export function egressFailureNotes(records: readonly EgressFailureRecord[]): string[] {
  const of = (reason: EgressFailureReason) => records.filter((r) => r.reason === reason);
  const notes: string[] = [];
  const notListed = of('not_listed');
  if (notListed.length > 0) {
    notes.push(
      `The sandbox's egress proxy refused ${listed(notListed, destination)}: not on this sandbox's allow-list ` +
        '(the proxy answered 403, which HTTPS clients report as "CONNECT tunnel failed, response 403"). ' +
        `To reach them, ${SETTING}.`,
    );
  }
  const nonPublic = of('private_address');
  if (nonPublic.length > 0) {
    const found = (r: EgressFailureRecord) => (r.address ? `${r.address}, a ${nonPublicKind(r.address)} address` : 'a non-public address');
    const entries = nonPublic.filter((r) => r.address && !r.host.includes('?')).slice(0, SHOWN_MAX);
    notes.push(
      `The sandbox's egress proxy refused ${listed(nonPublic, (r) => `${destination(r)} (it resolved to ${found(r)})`)}: listed by ` +
        'name, but the proxy refuses loopback, link-local and private addresses (403) unless an entry names the address itself. ' +
        (entries.length > 0
          ? `To reach them, create a sandbox whose network.allow_out names ${entries.map((r) => addressEntry(r.address!, r.port)).join(', ')}, within what the server permits (--network-allow / SANDBOX_MCP_NETWORK_ALLOW).`
          : `To reach them, ${SETTING.replace('names them', 'names their addresses')}.`),
    );
  }
  const unspecified = of('refusal_unspecified');
  if (unspecified.length > 0) {
    notes.push(
      `The sandbox's egress proxy refused ${listed(unspecified, destination)}: not on this sandbox's allow-list, or a name that resolves ` +
        'to a loopback, link-local or private address (the proxy answered 403, which HTTPS clients report as "CONNECT tunnel failed"). ' +
        `To reach them, ${SETTING}.`,
    );
  }
  const unreachable = records.filter((r) => !isRefusal(r.reason));
  if (unreachable.length > 0) {
    notes.push(
      `The sandbox's egress proxy could not reach ${listed(unreachable, (r) => `${destination(r)} (${UNREACHABLE_WHAT[r.reason] ?? 'failed'})`)}, ` +
        'which the allow-list allows: it answered 502 Bad Gateway (504 on a timeout), which HTTPS clients report as ' +
        '"CONNECT tunnel failed, response 502". The allow-list is not what failed: the name, the service, or the network beyond this machine is.',
    );
  }
  return notes;
}

/**
 * The notes on the requests the egress proxy of `sb` refused or could not get through from
 * `sinceMs` up to `untilMs`; [] for a sandbox without a proxy (no allow-list) or without failures.
 */
export async function egressNotes(sb: Pick<LiveSandbox, 'dir' | 'spec' | 'keeper'>, sinceMs: number, untilMs?: number): Promise<string[]> {
  if ((sb.spec.allowOut ?? []).length === 0) return [];
  return egressFailureNotes(await failuresBetween(sb.dir, sb.keeper.keeper.pid, sinceMs, untilMs));
}
