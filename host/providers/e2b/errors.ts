// The one place E2B SDK failures become ProviderErrors: a single table from SDK error classes
// (and HTTP statuses) to the fixed categories. The SDK's message text never passes through — it
// can carry URLs, request bodies and server text — only our category, the status and the class name.
import {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  NotFoundError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  ServiceBusyError,
  TemplateError,
  TimeoutError,
} from 'e2b';
import { isProviderError, ProviderError, type ErrorCategory } from '../provider-error.js';
import { definedFields } from '../../util/defined-fields.js';

type ErrorClass = abstract new (...args: never[]) => Error;

/**
 * SDK error class → category, most specific first. AuthenticationError and ServiceBusyError are not
 * SandboxErrors, so they are listed on their own; RateLimitError is a SandboxError with status 429.
 */
const CLASS_TABLE: ReadonlyArray<readonly [ErrorClass, ErrorCategory, number | undefined]> = [
  [AuthenticationError, 'authentication', 401],
  [ServiceBusyError, 'unavailable', 503],
  [RateLimitError, 'rate_limited', 429],
  [SandboxNotFoundError, 'not_found', 404],
  [FileNotFoundError, 'not_found', 404],
  [NotFoundError, 'not_found', 404],
  [InvalidArgumentError, 'invalid_argument', 400],
  [NotEnoughSpaceError, 'insufficient_resources', 507],
  [TemplateError, 'unsupported', undefined],
  [TimeoutError, 'timeout', undefined],
  [CommandExitError, 'internal', undefined],
];

/** HTTP status → category, for SandboxErrors the SDK builds as "<status>: <message>". */
const STATUS_TABLE: Readonly<Record<number, ErrorCategory>> = {
  400: 'invalid_argument',
  401: 'authentication',
  403: 'permission_denied',
  404: 'not_found',
  409: 'conflict',
  422: 'invalid_argument',
  429: 'rate_limited',
  500: 'internal',
  502: 'unavailable',
  503: 'unavailable',
  504: 'timeout',
  507: 'insufficient_resources',
};

/** Static explanations for the cases where the generic suggestion would mislead. */
const DETAILS: Partial<Record<string, string>> = {
  TemplateError: 'The template is not compatible with this SDK (its envd is too old); rebuild the template.',
  NotEnoughSpaceError:
    "The E2B sandbox's disk is full: remove files you no longer need (run_command with rm), or create sandboxes from a template with a larger disk.",
};

/**
 * Connect RPC codes (numeric, as the SDK prints them) that the SDK leaves as plain SandboxErrors.
 * The codes it maps itself (invalid_argument, not_found, ...) arrive as their own classes.
 */
const CONNECT_CODE_TABLE: Readonly<Record<number, readonly [string, ErrorCategory]>> = {
  2: ['unknown', 'internal'],
  6: ['already_exists', 'conflict'],
  7: ['permission_denied', 'permission_denied'],
  9: ['failed_precondition', 'conflict'],
  10: ['aborted', 'conflict'],
  11: ['out_of_range', 'invalid_argument'],
  12: ['unimplemented', 'unsupported'],
  13: ['internal', 'internal'],
  15: ['data_loss', 'internal'],
};

function statusOf(e: unknown): number | undefined {
  const s = (e as { statusCode?: unknown }).statusCode;
  return typeof s === 'number' && Number.isInteger(s) ? s : undefined;
}

/**
 * envd failures carry no statusCode: the SDK builds them as "<HTTP status>: …" (REST /files) or
 * "<Connect code number>: …" (RPC). Only that leading number is read; the rest is never used.
 */
function leadingNumber(e: SandboxError): number | undefined {
  const m = /^(\d{1,3}): /.exec(e.message);
  return m ? Number(m[1]) : undefined;
}

/** Maps anything the SDK (or fetch under it) throws to a ProviderError with static text only. */
export function mapE2bError(e: unknown): ProviderError {
  if (isProviderError(e)) return e;
  for (const [cls, category, status] of CLASS_TABLE) {
    if (e instanceof cls) {
      const code = cls.name;
      const s = statusOf(e) ?? status;
      return new ProviderError(category, { code, ...definedFields({ status: s, detail: DETAILS[code] }) });
    }
  }
  if (e instanceof SandboxError) {
    const n = statusOf(e) === undefined ? leadingNumber(e) : undefined;
    const rpc = n !== undefined && n < 100 ? CONNECT_CODE_TABLE[n] : undefined;
    if (rpc) return new ProviderError(rpc[1], { code: rpc[0] });
    const s = statusOf(e) ?? (n !== undefined && n >= 100 ? n : undefined);
    return new ProviderError((s !== undefined && STATUS_TABLE[s]) || 'internal', {
      code: 'SandboxError',
      // 507 Insufficient Storage is the disk, as NotEnoughSpaceError.
      ...definedFields({ status: s, detail: s === 507 ? DETAILS.NotEnoughSpaceError : undefined }),
    });
  }
  if (e instanceof Error) {
    // AbortSignal.timeout → TimeoutError DOMException; fetch network failures → TypeError.
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return new ProviderError('timeout', { code: e.name });
    if (e.name === 'TypeError' && /fetch failed|network|ECONNREFUSED|socket/i.test(e.message)) {
      return new ProviderError('unavailable', { code: 'NetworkError' });
    }
  }
  return new ProviderError('internal');
}

/** Runs `fn`, mapping any failure with mapE2bError. */
export async function mapped<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    throw mapE2bError(e);
  }
}
