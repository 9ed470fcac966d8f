// Who is calling, and which sandboxes that lets them see. Over stdio, and over HTTP with the one
// SANDBOX_MCP_TOKEN, the caller is the operator: it sees every sandbox and records no owner (the
// single-user server, unchanged). Over HTTP with a tokens file, each token is a named principal:
// a sandbox records the name of the principal that created it, a `user` sees only its own, and
// an `admin` sees everything.

/** The roles a named principal may have. */
export const ROLES = ['user', 'admin'] as const;
/** One of ROLES. */
export type Role = (typeof ROLES)[number];

/** The caller of a session: the operator, or a named principal from the tokens file. */
export type Principal = { kind: 'operator' } | { kind: 'named'; name: string; role: Role };

/** The single-user caller: stdio, or HTTP with one plain token. */
export const OPERATOR: Principal = { kind: 'operator' };

// A principal's name pattern lives with the provider contract: providers record owners too.
export { PRINCIPAL_NAME_PATTERN } from '../providers/provider.js';

/** The owner recorded on a sandbox `p` creates: its name, or none for the operator. */
export function ownerRecordedBy(p: Principal): string | undefined {
  return p.kind === 'named' ? p.name : undefined;
}

/** True when `p` sees every sandbox, whoever created it. */
export function seesEverything(p: Principal): boolean {
  return p.kind === 'operator' || p.role === 'admin';
}

/** True when `p` may see and touch a sandbox whose record names `owner` (null: none recorded). */
export function maySee(p: Principal, owner: string | null): boolean {
  return seesEverything(p) || (p.kind === 'named' && owner === p.name);
}

/** True when two principals are the same caller (an HTTP session stays with the principal that opened it). */
export function isSamePrincipal(a: Principal, b: Principal): boolean {
  if (a.kind === 'operator' || b.kind === 'operator') return a.kind === b.kind;
  return a.name === b.name && a.role === b.role;
}
