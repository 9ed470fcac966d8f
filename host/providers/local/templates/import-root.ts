// `template import`: a root filesystem from a tar archive (what `docker export` or `podman export`
// writes, compressed or not) or a directory becomes a one-layer template. A root server keeps the
// files' owners (`native`); any other server cannot, so every file becomes its own (`flattened`),
// and apt, which would switch to its `_apt` user, is told to stay root (that id does not exist
// in such a sandbox). /dev's contents are left out: a sandbox gets its own /dev.
import { lstatSync, mkdirSync, realpathSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { copyTree, resolveInTree, runProgram } from './file-tree.js';
import type { LayerOwners } from './store.js';

/** What was imported: the source's kind and its base name (a full host path says more than needed). */
export interface ImportSource {
  format: 'tar' | 'directory';
  from: string;
}

/** What the server's user makes of a layer's owners: kept as they are (root) or all its own. */
export function layerOwnersHere(): LayerOwners {
  return process.geteuid?.() === 0 ? 'native' : 'flattened';
}

/** apt's setting in a flattened root: its sandbox user `_apt` cannot be switched to there. */
export const FLATTENED_APT_CONF = { path: '/etc/apt/apt.conf.d/99sandbox-mcp', text: 'APT::Sandbox::User "root";\n' } as const;

function isUnder(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : dir + '/');
}

/**
 * Checks the source (a tar archive or a directory, not one holding the templates directory) and
 * tells which it is. Throws invalid_argument naming `field`.
 */
export function classifySource(source: string, field: string, templatesDir: string): ImportSource {
  let real: string;
  try {
    real = realpathSync(source);
  } catch {
    throw new ProviderError('invalid_argument', { code: 'import_source_missing', detail: `${field} does not exist or cannot be read.` });
  }
  const st = statSync(real);
  if (st.isDirectory()) {
    let templates = templatesDir;
    try {
      templates = realpathSync(templatesDir);
    } catch {
      // Not made yet: as configured.
    }
    if (isUnder(templates, real)) {
      throw new ProviderError('invalid_argument', {
        code: 'import_source_holds_templates',
        detail: `${field} must not contain the templates directory.`,
      });
    }
    return { format: 'directory', from: basename(real) };
  }
  if (st.isFile()) return { format: 'tar', from: basename(real) };
  throw new ProviderError('invalid_argument', { code: 'import_source_kind', detail: `${field} must be a tar archive or a directory.` });
}

/** tar's arguments for extracting a root filesystem into `root`, as this user can. */
function tarArgs(archive: string, root: string, owners: LayerOwners): string[] {
  const keep =
    owners === 'native'
      ? ['--numeric-owner', '--same-owner', '--xattrs', '--xattrs-include=*']
      : // Every file this user's: it cannot give them to anyone else.
        ['--no-same-owner'];
  // Anchored: `dev/*` must not also match .../dev/... deeper in the tree. Both spellings of members occur.
  return ['-x', '-f', archive, '-C', root, '--same-permissions', ...keep, '--anchored', '--exclude=./dev/*', '--exclude=dev/*'];
}

/**
 * Fills `root` (which does not exist yet) from `source`; then checks that it is a root filesystem
 * a sandbox can run commands in (a /bin/sh), and adds apt's setting to a flattened one. Throws
 * invalid_argument when the source cannot be read as one; `onOutput` hears the tools' complaints.
 */
export async function fillFromSource(
  root: string,
  source: string,
  kind: ImportSource,
  owners: LayerOwners,
  onOutput: (line: string) => void,
): Promise<void> {
  mkdirSync(root, { mode: 0o755 });
  const done = kind.format === 'tar' ? await runProgram('tar', tarArgs(source, root, owners)) : await copyTree(source, root);
  if (done.status !== 0) {
    for (const line of done.stderr.trim().split('\n').slice(-5)) if (line) onOutput(line);
    throw new ProviderError('invalid_argument', {
      code: 'import_failed',
      detail:
        kind.format === 'tar'
          ? 'The archive could not be extracted (tar failed; its last lines are above): is it a tar archive of a root filesystem?'
          : 'The directory could not be copied (cp failed; its last lines are above): can this user read all of it?',
    });
  }
  finishRoot(root, owners);
}

/**
 * Checks that a filled root is one a sandbox can run commands in (a /bin/sh) and adds apt's
 * setting to a flattened one. Throws invalid_argument (not_a_root).
 */
export function finishRoot(root: string, owners: LayerOwners): void {
  const shell = resolveInTree(root, '/bin/sh');
  if (!shell || !statSync(shell, { throwIfNoEntry: false })?.isFile()) throw notARoot();
  if (owners === 'flattened') addFlattenedAptSetting(root);
}

/** Refusal of what has no /bin/sh at its top. */
export function notARoot(): ProviderError {
  return new ProviderError('invalid_argument', {
    code: 'not_a_root',
    detail: 'What was imported has no /bin/sh at its top: a template must be a root filesystem (what docker export writes) with a shell.',
  });
}

/** Tells apt in a flattened root to stay root (where the root has apt). */
export function addFlattenedAptSetting(root: string): void {
  const confDir = resolveInTree(root, '/etc/apt/apt.conf.d');
  if (confDir && lstatSync(confDir, { throwIfNoEntry: false })?.isDirectory()) {
    writeFileSync(join(confDir, basename(FLATTENED_APT_CONF.path)), FLATTENED_APT_CONF.text, { mode: 0o644 });
  }
}
