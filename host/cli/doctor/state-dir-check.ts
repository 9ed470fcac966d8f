// The local provider's state directory: private to this user (the provider refuses any other),
// or creatable when it does not exist yet.
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { isProviderError } from '../../providers/provider-error.js';
import { assertPrivateState } from '../../providers/local/sandbox/state-dir.js';
import { fail, ok, type Check } from './check.js';

const FIX = 'point SANDBOX_MCP_STATE_DIR at a directory you own that nobody else may write (chmod 700)';

function nearestExisting(path: string): string {
  let dir = path;
  for (;;) {
    try {
      statSync(dir);
      return dir;
    } catch {
      if (dirname(dir) === dir) return dir;
      dir = dirname(dir);
    }
  }
}

/** The state directory as the provider will judge it (assertPrivateState), with owner and mode shown. */
export function checkStateDir(stateDir: string): Check {
  let mode: string | undefined;
  try {
    const st = statSync(stateDir);
    mode = `owner uid ${st.uid}, mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}`;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') return fail('state directory', `${stateDir} cannot be read`, FIX);
  }
  if (mode === undefined) {
    const parent = nearestExisting(dirname(stateDir));
    try {
      accessSync(parent, fsConstants.W_OK | fsConstants.X_OK);
      return ok('state directory', `${stateDir} does not exist yet; it will be created (mode 0700)`);
    } catch {
      return fail('state directory', `${stateDir} cannot be created (${parent} is not writable)`, FIX);
    }
  }
  try {
    assertPrivateState(stateDir);
  } catch (e) {
    return fail('state directory', `${stateDir} (${mode}): ${isProviderError(e) ? e.suggestion : 'cannot be checked'}`, FIX);
  }
  return ok('state directory', `${stateDir} (${mode})`);
}
