// Before the first sandbox: is this Linux on an architecture the helpers know, and where are bwrap,
// nsenter, setpriv, flock, perl and the built keeper with its helpers? Each missing piece is an
// unavailable (or unsupported) ProviderError with a fix in it.
import { accessSync, constants as fsConstants, existsSync, statSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS } from '../errors.js';
import type { ToolPaths } from '../launch/command-lines.js';
import { helpersDir, isHelperArch, type PerlHelper } from '../launch/perl-helpers.js';
import type { LocalSettings } from '../settings.js';

/** The helpers a build ships in dist/helpers/. */
const HELPERS: readonly PerlHelper[] = ['mount-root', 'enter', 'userns-off', 'copy-meta'];

function isExecutable(path: string): boolean {
  try {
    accessSync(path, fsConstants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** The first executable `name` on PATH or in the usual system directories, or null. */
export function findExecutable(name: string): string | null {
  const dirs = [
    ...(process.env.PATH ?? '').split(delimiter),
    '/usr/local/sbin',
    '/usr/local/bin',
    '/usr/sbin',
    '/usr/bin',
    '/sbin',
    '/bin',
  ];
  for (const dir of dirs) {
    if (dir && isExecutable(join(dir, name))) return join(dir, name);
  }
  return null;
}

/** Where a system tool is: the path given for it (used or reported missing, never searched for elsewhere), else PATH's. */
export function locateTool(name: keyof ToolPaths, overrides: Partial<ToolPaths>): string | null {
  const path = overrides[name];
  if (path === undefined) return findExecutable(name);
  return isExecutable(path) ? path : null;
}

/** The system tools sandboxes are built and entered with; throws the first missing prerequisite. */
export function preflight(settings: Pick<LocalSettings, 'toolOverrides' | 'identity' | 'keeperScript' | 'shell'>): ToolPaths {
  if (process.platform !== 'linux') throw new ProviderError('unsupported', { detail: LOCAL_DETAILS.notLinux });
  if (!isHelperArch(process.arch))
    throw new ProviderError('unsupported', { code: 'arch_unsupported', detail: LOCAL_DETAILS.archUnsupported });
  const tool = (name: keyof ToolPaths): string | null => locateTool(name, settings.toolOverrides);
  const bwrap = tool('bwrap');
  if (!bwrap) {
    // A named binary that is not there is a setting to fix, not a package to install.
    const detail = settings.toolOverrides.bwrap !== undefined ? LOCAL_DETAILS.bwrapOverrideMissing : LOCAL_DETAILS.bwrapMissing;
    throw new ProviderError('unavailable', { code: 'bwrap_missing', detail });
  }
  const nsenter = tool('nsenter');
  if (!nsenter) throw new ProviderError('unavailable', { code: 'nsenter_missing', detail: LOCAL_DETAILS.nsenterMissing });
  const setpriv = tool('setpriv');
  if (!setpriv && settings.identity.dropPrivileges) {
    throw new ProviderError('unavailable', { code: 'setpriv_missing', detail: LOCAL_DETAILS.setprivMissing });
  }
  // Creates take the state directory's lock with it (sandbox/create-lock.ts).
  if (!findExecutable('flock')) throw new ProviderError('unavailable', { code: 'flock_missing', detail: LOCAL_DETAILS.flockMissing });
  // Every sandbox needs it: its keeper forbids user namespaces inside with a perl helper.
  const perl = tool('perl');
  if (!perl) throw new ProviderError('unavailable', { code: 'perl_missing', detail: LOCAL_DETAILS.perlMissing });
  const helpers = helpersDir(settings.keeperScript);
  if (!existsSync(settings.keeperScript) || !HELPERS.every((h) => existsSync(join(helpers, `${h}.pl`)))) {
    throw new ProviderError('unavailable', { code: 'host_bundle_missing', detail: LOCAL_DETAILS.hostBundleMissing });
  }
  return { bwrap, nsenter, setpriv: setpriv ?? 'setpriv', sh: existsSync('/bin/sh') ? '/bin/sh' : settings.shell, perl };
}
