// The connection options every SDK call carries (credentials, endpoints, request timeout), built
// once from the server's configuration. Without an API key each call fails on its own, so a server
// that never touches E2B never needs one.
import { ProviderError } from '../provider-error.js';
import { definedFields } from '../../util/defined-fields.js';

/** Where and how the SDK reaches E2B: configuration from the server, never from tool arguments. */
export interface E2bConnectionConfig {
  /** Defaults to $E2B_API_KEY; without one every call fails with `authentication`. */
  apiKey?: string;
  /** Defaults to $E2B_DOMAIN, then the SDK's default (e2b.app). */
  domain?: string;
  /** Control-plane URL; defaults to the SDK's ($E2B_API_URL or https://api.<domain>). */
  apiUrl?: string;
  /** envd URL; defaults to the SDK's ($E2B_SANDBOX_URL or per-sandbox hosts). */
  sandboxUrl?: string;
  /** Per-request timeout of control-plane and envd calls (the SDK's default is 60 s). */
  requestTimeoutMs?: number;
}

/** The options the SDK's static methods, Sandbox.create and Sandbox.connect accept for reaching E2B. */
export interface SdkOpts {
  apiKey: string;
  logger: Record<string, never>;
  domain?: string;
  apiUrl?: string;
  sandboxUrl?: string;
  requestTimeoutMs?: number;
}

// The SDK's default request logging (enabled by E2B_USER_AGENT_SOURCE=ci) writes raw lines to
// stderr, which is this server's structured log: keep it silent.
const QUIET_LOGGER: Record<string, never> = {};

/**
 * The SDK options for `config` (unset fields from E2B_API_KEY and E2B_DOMAIN, read now). The
 * returned function throws `authentication` (code MissingApiKey) on every call while no key is set.
 */
export function sdkOptsFrom(config: E2bConnectionConfig): () => SdkOpts {
  const apiKey = config.apiKey ?? process.env.E2B_API_KEY;
  // Empty strings and a zero timeout mean "not set", as in the SDK's own environment handling.
  const rest = definedFields({
    domain: (config.domain ?? process.env.E2B_DOMAIN) || undefined,
    apiUrl: config.apiUrl || undefined,
    sandboxUrl: config.sandboxUrl || undefined,
    requestTimeoutMs: config.requestTimeoutMs || undefined,
  });
  return () => {
    if (!apiKey) {
      throw new ProviderError('authentication', {
        code: 'MissingApiKey',
        detail: 'E2B is not configured: set E2B_API_KEY in the server environment.',
      });
    }
    return { apiKey, logger: QUIET_LOGGER, ...rest };
  };
}
