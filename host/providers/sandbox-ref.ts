// Qualified sandbox ids: `provider:id`. Ids the server returns are always qualified; an
// unqualified id belongs to the configured default provider.
import { ProviderError } from './provider-error.js';

/** The providers a server knows, by the id that qualifies their sandboxes' ids. */
export const PROVIDER_IDS = ['local', 'e2b'] as const;
/** One of PROVIDER_IDS. */
export type ProviderId = (typeof PROVIDER_IDS)[number];

/** A sandbox reference split into its provider and the provider's own id. */
export interface SandboxRef {
  provider: ProviderId;
  id: string;
  /** `provider:id`, the form every result carries. */
  qualified: string;
}

const RAW_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** Parses an id as a caller gave it; throws invalid_argument naming the field, never the value. */
export function parseSandboxRef(text: string, defaultProvider: ProviderId, field = 'sandbox_id'): SandboxRef {
  const colon = text.indexOf(':');
  const provider = colon === -1 ? defaultProvider : text.slice(0, colon);
  const id = colon === -1 ? text : text.slice(colon + 1);
  if (!(PROVIDER_IDS as readonly string[]).includes(provider)) {
    throw new ProviderError('invalid_argument', {
      detail: `field \`${field}\` names an unknown provider (expected one of: ${PROVIDER_IDS.join(', ')})`,
    });
  }
  if (!RAW_ID.test(id)) {
    throw new ProviderError('invalid_argument', { detail: `field \`${field}\` is not a valid sandbox id` });
  }
  return { provider: provider as ProviderId, id, qualified: `${provider}:${id}` };
}

/** The qualified form of a provider's own id. */
export function qualify(provider: ProviderId, id: string): SandboxRef {
  return { provider, id, qualified: `${provider}:${id}` };
}
