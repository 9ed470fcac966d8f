// What create needs of a stored template (templates/store.ts) to run a sandbox on it: its layers,
// how this server maps their owners, and the shell its commands get.
import { lstatSync, readlinkSync } from 'node:fs';
import { join, posix } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS } from '../errors.js';
import type { TemplateRoot } from '../sandbox/spec.js';
import { layerOwnersHere } from '../templates/import-root.js';
import { readTemplate, templateLowerDirs } from '../templates/store.js';

/**
 * The root of a sandbox on template `name` from the store in `templatesDir`. Throws not_found
 * (naming `template`) when there is no such template, unsupported when it was made for a server
 * of the other kind (its owners cannot be mapped here).
 */
export function resolveTemplateRoot(templatesDir: string, name: string, isRoot: boolean): TemplateRoot {
  const record = readTemplate(templatesDir, name);
  if (!record) throw new ProviderError('not_found', { code: 'template_not_found', detail: LOCAL_DETAILS.templateNotFound });
  // Native owners for root (idmapped per sandbox), flattened to its own uid otherwise (import-root.ts).
  if (record.owners !== layerOwnersHere()) {
    throw new ProviderError('unsupported', { code: 'template_owners', detail: LOCAL_DETAILS.templateOwnersMismatch });
  }
  return { layers: templateLowerDirs(templatesDir, record), mode: isRoot ? 'idrange' : 'userns' };
}

/**
 * The variables the template gives its sandboxes' commands (its record's `env`: a Debian build's
 * DEBIAN_FRONTEND), beneath create's own `envs`; none for an unknown template.
 */
export function templateEnv(templatesDir: string, name: string): Record<string, string> {
  return { ...readTemplate(templatesDir, name)?.env };
}

/**
 * Whether `path` (absolute, inside the root) exists in the union of `layers` (top first), following
 * symlinks inside the root (a merged-/usr root's /bin is `usr/bin`). Whiteouts are not looked at:
 * an upper layer that deleted a file the lower one has is taken to have it (a shell it removed is rare).
 */
export function existsInLayers(layers: readonly string[], path: string, depth = 0): boolean {
  if (depth > 16) return false;
  const parts = path.split('/').filter(Boolean);
  for (let i = 1; i <= parts.length; i++) {
    const prefix = '/' + parts.slice(0, i).join('/');
    const layer = layers.find((l) => lstatOrNull(join(l, prefix)) !== null);
    if (layer === undefined) return false;
    const st = lstatOrNull(join(layer, prefix))!;
    if (st.isSymbolicLink()) {
      const target = readlinkSync(join(layer, prefix));
      const resolved = posix.resolve(posix.dirname(prefix), target, ...parts.slice(i));
      return existsInLayers(layers, resolved, depth + 1);
    }
  }
  return true;
}

function lstatOrNull(path: string): ReturnType<typeof lstatSync> | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/** The shell a template's commands run with: bash where the template has it, else /bin/sh. */
export function templateShell(layers: readonly string[]): string {
  return existsInLayers(layers, '/bin/bash') ? '/bin/bash' : '/bin/sh';
}
