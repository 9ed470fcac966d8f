// Checks of call arguments shared by the provider's operations. Each failure is an
// invalid_argument ProviderError whose detail names the argument, never its value.
import { envsBytes, LIMITS } from '../../../shared/limits.js';
import { ProviderError } from '../provider-error.js';
import { SANDBOX_LIFETIME_MAX_S, SANDBOX_LIFETIME_MIN_S } from '../provider.js';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The invalid_argument error with a static detail. */
export function invalid(detail: string): ProviderError {
  return new ProviderError('invalid_argument', { detail });
}

/**
 * A copy of `envs` whose names are identifiers, whose values are strings without NUL bytes and
 * which takes at most LIMITS.envsMaxBytes; throws otherwise.
 */
export function validateEnvs(envs: Record<string, string> | undefined, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(envs ?? {})) {
    if (!ENV_NAME.test(name)) throw invalid(`${what}: an environment variable name is not a valid identifier.`);
    if (typeof value !== 'string' || value.includes('\0'))
      throw invalid(`${what}: an environment variable value is not a string without NUL bytes.`);
    out[name] = value;
  }
  if (envsBytes(out) > LIMITS.envsMaxBytes)
    throw invalid(`${what} is too large (at most ${LIMITS.envsMaxBytes} bytes as NAME=value strings).`);
  return out;
}

/** True for a safe integer of at least 0. */
export function isNonNegativeInt(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}

/** Throws unless `timeoutS` is a sandbox lifetime within the contract's bounds. */
export function assertLifetimeS(timeoutS: unknown): asserts timeoutS is number {
  if (typeof timeoutS !== 'number' || !(timeoutS >= SANDBOX_LIFETIME_MIN_S && timeoutS <= SANDBOX_LIFETIME_MAX_S)) {
    throw invalid(`timeout must be between ${SANDBOX_LIFETIME_MIN_S} and ${SANDBOX_LIFETIME_MAX_S} seconds.`);
  }
}
