// What the egress proxy reports when a request does not get through: the allow-list's refusals
// (403) and allowed destinations it could not reach (502/504), each with the host and port the
// sandbox asked for. The keeper keeps the recent ones in memory (FailureMemory, for the notes on
// a failed command, every time) and appends some to a file (failure-log.ts, for the server's log,
// once a minute per destination).

/** Why a request did not get through: two refusals of the allow-list's, then the ways an allowed destination was out of reach. */
export type EgressFailureReason =
  /** No entry allows the host and port (403). */
  | 'not_listed'
  /** An entry allows the name, but it resolved only to non-public addresses no entry names (403). */
  | 'private_address'
  /** A refusal recorded by an older keeper, which did not say which of the two (nor the port). */
  | 'refusal_unspecified'
  /** The name did not resolve on the host (502). */
  | 'unresolvable'
  /** The destination refused the connection: nothing listens there (502). */
  | 'connection_refused'
  /** No connection, or no answer to a forwarded request, within the proxy's timeout (504). */
  | 'timeout'
  /** The host has no route to the destination, or connecting failed otherwise (502). */
  | 'unreachable'
  /** Connected, but the destination closed or broke the connection before a valid answer (502). */
  | 'upstream_error';

/** Every reason, in the order notes list them. */
export const EGRESS_FAILURE_REASONS: readonly EgressFailureReason[] = [
  'not_listed',
  'private_address',
  'refusal_unspecified',
  'unresolvable',
  'connection_refused',
  'timeout',
  'unreachable',
  'upstream_error',
];

/** True for the allow-list's own refusals (the proxy answered 403), false for a destination out of reach. */
export function isRefusal(reason: EgressFailureReason): boolean {
  return reason === 'not_listed' || reason === 'private_address' || reason === 'refusal_unspecified';
}

/** One request that did not get through: the host (as the sandbox wrote it, sanitised) and port it asked for. */
export interface EgressFailure {
  host: string;
  port: number;
  reason: EgressFailureReason;
  /** For private_address: the non-public address the name resolved to. */
  address?: string;
}

/** A failure with its time (epoch ms). */
export interface EgressFailureRecord extends EgressFailure {
  at: number;
}

/** Parses a record as the keeper writes or sends it; null for anything else. An older keeper's `{at, host}` reads as refusal_unspecified on port 0 (unknown). */
export function parseFailureRecord(value: unknown): EgressFailureRecord | null {
  if (typeof value !== 'object' || value === null) return null;
  const r = value as Record<string, unknown>;
  if (typeof r.at !== 'number' || typeof r.host !== 'string') return null;
  const reason = r.reason === undefined ? 'refusal_unspecified' : EGRESS_FAILURE_REASONS.find((x) => x === r.reason);
  if (reason === undefined) return null;
  const port = typeof r.port === 'number' && Number.isInteger(r.port) && r.port >= 0 && r.port <= 65535 ? r.port : 0;
  return { at: r.at, host: r.host, port, reason, ...(typeof r.address === 'string' ? { address: r.address } : {}) };
}

/** The key under which failures of one kind for one destination are counted once. */
export function failureKey(f: EgressFailure): string {
  return `${f.reason} ${f.host} ${f.port}`;
}

/** Most destinations (reason, host, port) the memory keeps; the least recently failed goes first. */
const KEYS_MAX = 256;
/** Most times kept per destination: a command that fails the same request many times needs only the latest. */
const TIMES_PER_KEY = 8;

/**
 * The keeper's memory of recent failures, for the notes on failed commands: every failure is
 * remembered (the file's once-a-minute limit is for the log), bounded by destinations and by
 * times per destination. A window whose failures were all pushed out finds none here; the notes
 * then fall back on the file.
 */
export class FailureMemory {
  private readonly byKey = new Map<string, { failure: EgressFailure; times: number[] }>();

  /** Remembers `failure` at `atMs`. */
  record(failure: EgressFailure, atMs = Date.now()): void {
    const key = failureKey(failure);
    let entry = this.byKey.get(key);
    if (entry) this.byKey.delete(key);
    else {
      if (this.byKey.size >= KEYS_MAX) this.byKey.delete(this.byKey.keys().next().value!);
      entry = { failure, times: [] };
    }
    entry.times.push(atMs);
    if (entry.times.length > TIMES_PER_KEY) entry.times.shift();
    // Re-inserted last: the map's order is the order of the latest failure, so the first key is the stalest.
    this.byKey.set(key, entry);
  }

  /** One record per destination that failed at or after `sinceMs` and before `untilMs`, with its latest time in that span, oldest first. */
  between(sinceMs: number, untilMs = Infinity): EgressFailureRecord[] {
    const out: EgressFailureRecord[] = [];
    for (const { failure, times } of this.byKey.values()) {
      const inSpan = times.filter((t) => t >= sinceMs && t < untilMs);
      if (inSpan.length > 0) out.push({ ...failure, at: inSpan[inSpan.length - 1]! });
    }
    return out.sort((a, b) => a.at - b.at);
  }
}
