// The one mapping table from E2B SDK errors to the fixed categories, on constructed SDK errors.
import {
  AuthenticationError,
  CommandExitError,
  FileNotFoundError,
  InvalidArgumentError,
  NotEnoughSpaceError,
  RateLimitError,
  SandboxError,
  SandboxNotFoundError,
  ServiceBusyError,
  TemplateError,
  TimeoutError,
} from 'e2b';
import { describe, expect, test } from 'vitest';
import { ProviderError } from '../../host/providers/provider-error.js';
import { mapE2bError } from '../../host/providers/e2b/errors.js';

const RAW = 'raw text with https://api.e2b.app/sandboxes/secret?token=abc';

function withStatus<E extends SandboxError>(e: E, status: number): E {
  e.statusCode = status;
  return e;
}

describe('mapE2bError', () => {
  const cases: Array<[string, unknown, string, number | undefined]> = [
    ['AuthenticationError', new AuthenticationError(RAW), 'authentication', 401],
    ['ServiceBusyError', new ServiceBusyError(RAW), 'unavailable', 503],
    ['RateLimitError', new RateLimitError(RAW), 'rate_limited', 429],
    ['SandboxNotFoundError', new SandboxNotFoundError(RAW), 'not_found', 404],
    ['FileNotFoundError', new FileNotFoundError(RAW), 'not_found', 404],
    ['InvalidArgumentError', new InvalidArgumentError(RAW), 'invalid_argument', 400],
    ['NotEnoughSpaceError', new NotEnoughSpaceError(RAW), 'insufficient_resources', 507],
    ['TemplateError', new TemplateError(RAW), 'unsupported', undefined],
    ['TimeoutError', new TimeoutError(RAW), 'timeout', undefined],
    ['CommandExitError', new CommandExitError({ exitCode: 1, error: RAW, stdout: RAW, stderr: RAW }), 'internal', undefined],
    ['SandboxError', withStatus(new SandboxError(`400: ${RAW}`), 400), 'invalid_argument', 400],
    ['SandboxError', withStatus(new SandboxError(`403: ${RAW}`), 403), 'permission_denied', 403],
    ['SandboxError', withStatus(new SandboxError(`409: ${RAW}`), 409), 'conflict', 409],
    ['SandboxError', withStatus(new SandboxError(`502: ${RAW}`), 502), 'unavailable', 502],
    ['SandboxError', withStatus(new SandboxError(`418: ${RAW}`), 418), 'internal', 418],
    ['SandboxError', new SandboxError(RAW), 'internal', undefined],
    // envd failures the SDK leaves as SandboxErrors: "<HTTP status>: …" (REST) and "<Connect code>: …" (RPC).
    ['SandboxError', new SandboxError(`500: ${RAW}`), 'internal', 500],
    ['SandboxError', new SandboxError(`403: ${RAW}`), 'permission_denied', 403],
    ['permission_denied', new SandboxError(`7: [permission_denied] ${RAW}`), 'permission_denied', undefined],
    ['already_exists', new SandboxError(`6: [already_exists] ${RAW}`), 'conflict', undefined],
    ['failed_precondition', new SandboxError(`9: [failed_precondition] ${RAW}`), 'conflict', undefined],
    ['unimplemented', new SandboxError(`12: [unimplemented] ${RAW}`), 'unsupported', undefined],
    ['internal', new SandboxError(`13: [internal] ${RAW}`), 'internal', undefined],
    ['SandboxError', new SandboxError(`1234: ${RAW}`), 'internal', undefined],
    ['TimeoutError', new DOMException(RAW, 'TimeoutError'), 'timeout', undefined],
    ['NetworkError', new TypeError('fetch failed'), 'unavailable', undefined],
  ];
  test.each(cases)('%s → category, status, code; no message passes', (code, err, category, status) => {
    const mapped = mapE2bError(err);
    expect(mapped).toBeInstanceOf(ProviderError);
    expect(mapped.toJSON()).toEqual({ category, ...(status !== undefined ? { status } : {}), code, suggestion: mapped.suggestion });
    expect(`${mapped.message} ${JSON.stringify(mapped)}`).not.toMatch(/raw text|https?:|token/);
  });

  test('anything else is internal, and ProviderErrors pass unchanged', () => {
    expect(mapE2bError(new Error(RAW)).toJSON()).toEqual({ category: 'internal', suggestion: expect.any(String) });
    expect(mapE2bError('a string').category).toBe('internal');
    const own = new ProviderError('unsupported', { detail: 'ours' });
    expect(mapE2bError(own)).toBe(own);
  });
});
