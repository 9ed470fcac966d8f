// What create needs of a stored template (templates/store.ts) to run a sandbox on it: its layers,
// how this server maps their owners, and the shell its commands get.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS } from '../errors.js';
import type { TemplateRoot } from '../sandbox/spec.js';
import { imageEnvs } from '../templates/images/image-manifest.js';
import { StackView } from '../templates/images/layer-stack.js';
import { layerOwnersHere } from '../templates/import-root.js';
import { LayerRecordSchema, readTemplate, templateLowerDirs } from '../templates/store.js';

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
 * The variables the template gives its sandboxes' commands, beneath create's own `envs`: an
 * image's Env (its author's defaults: PATH, LANG, …), then its record's `env` (a Debian build's
 * DEBIAN_FRONTEND); none for an unknown template.
 */
export function templateEnv(templatesDir: string, name: string): Record<string, string> {
  const record = readTemplate(templatesDir, name);
  return { ...imageEnvs(record?.image?.config.env ?? []), ...record?.env };
}

/** The directories layer `root` (`layers/<id>/root`) marks opaque, as its record lists them (an image layer's; none for others). */
function recordedOpaqueDirs(root: string): Set<string> {
  try {
    const record = LayerRecordSchema.safeParse(JSON.parse(readFileSync(join(dirname(root), 'layer.json'), 'utf8')));
    return new Set(record.success ? (record.data.image?.opaque_dirs ?? []) : []);
  } catch {
    return new Set();
  }
}

/**
 * The shell a template's commands run with: bash where the merged view of its `layers` (top
 * first) has it as a file, else /bin/sh. Read as the overlay will show it (images/layer-stack.ts):
 * links followed inside the stack only, whiteouts and the opaque directories an image layer's
 * record lists honoured (an image whose upper layer removed bash gets /bin/sh); a snapshot
 * layer's opaque marks are xattrs, not read here (a shell it removed that way is rare).
 */
export function templateShell(layers: readonly string[]): string {
  const view = new StackView(layers.map((root) => ({ root, opaque: recordedOpaqueDirs(root) })));
  return view.resolve(['bin', 'bash'], true)?.found.st.isFile() ? '/bin/bash' : '/bin/sh';
}
