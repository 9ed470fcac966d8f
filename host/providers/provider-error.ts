// The fixed failure categories a tool may report, each with a static recovery suggestion.
// Raw provider messages, URLs, paths of the host and stack traces never go into these errors.
import { definedFields } from '../util/defined-fields.js';

/** The only categories a provider failure is ever reported as. */
export const ERROR_CATEGORIES = [
  'invalid_argument',
  'not_found',
  'authentication',
  'permission_denied',
  'rate_limited',
  'timeout',
  'unavailable',
  'insufficient_resources',
  'conflict',
  'unsupported',
  'internal',
] as const;
export type ErrorCategory = (typeof ERROR_CATEGORIES)[number];

/** A static suggestion per category: what the caller can do next. */
export const RECOVERY_SUGGESTIONS: Record<ErrorCategory, string> = {
  invalid_argument: 'Check the arguments against the tool schema and try again.',
  not_found: 'The sandbox, task or path does not exist (it may have expired); list sandboxes or create a new one.',
  authentication: 'Check the credentials in the server configuration (for example E2B_API_KEY).',
  permission_denied: 'The operation is not permitted for this sandbox user or account.',
  rate_limited: 'Too many requests; wait a little and retry.',
  timeout: 'The operation took too long; retry, or use a longer timeout or start_task for long work.',
  unavailable: 'The provider is temporarily unavailable; retry later.',
  insufficient_resources: 'Not enough resources (quota, disk or memory); free some or ask for less.',
  conflict: 'The resource is in a conflicting state; inspect it and retry.',
  unsupported: 'This option is not supported by the selected provider.',
  internal: 'An unexpected internal error occurred; retry, or destroy and recreate the sandbox.',
};

export interface ProviderErrorOpts {
  /** HTTP status when known. */
  status?: number;
  /** A provider or SDK error code when known (a static identifier, never a message). */
  code?: string;
  /** A static explanation written by us (never a provider's text). Overrides the default suggestion. */
  detail?: string;
}

/** The one error type providers throw. Its message is static text of ours. */
export class ProviderError extends Error {
  readonly category: ErrorCategory;
  readonly status?: number;
  readonly code?: string;
  readonly suggestion: string;

  constructor(category: ErrorCategory, opts: ProviderErrorOpts = {}) {
    super(opts.detail ?? RECOVERY_SUGGESTIONS[category]);
    this.name = 'ProviderError';
    this.category = category;
    if (opts.status !== undefined) this.status = opts.status;
    if (opts.code !== undefined) this.code = opts.code;
    this.suggestion = opts.detail ?? RECOVERY_SUGGESTIONS[category];
  }

  /** The JSON a tool result carries for this error. */
  toJSON(): { category: ErrorCategory; status?: number; code?: string; suggestion: string } {
    return {
      category: this.category,
      ...definedFields({ status: this.status, code: this.code }),
      suggestion: this.suggestion,
    };
  }
}

/** True for a ProviderError (across module copies too). */
export function isProviderError(e: unknown): e is ProviderError {
  return e instanceof ProviderError || (e instanceof Error && e.name === 'ProviderError' && 'category' in e);
}
