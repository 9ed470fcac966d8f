// The errors of making, listing and removing templates: static texts of ours, naming the field
// that is wrong but never its value.
import { ProviderError } from '../../provider-error.js';

/** The template name rule in words (store.ts's TEMPLATE_NAME_PATTERN and `base`). */
export const TEMPLATE_NAME_RULE =
  "lowercase letters, digits, '.', '_' and '-', starting with a letter or digit, at most 63 characters, and not 'base'";

/** invalid_argument for a template name against the rule; `field` names the argument (`name`, `NAME`). */
export function badTemplateName(field: string): ProviderError {
  return new ProviderError('invalid_argument', { code: 'bad_template_name', detail: `${field} must be ${TEMPLATE_NAME_RULE}.` });
}

export function templateExists(): ProviderError {
  return new ProviderError('conflict', {
    code: 'template_exists',
    detail: 'A template of that name already exists: choose another name, or remove it first (sandbox-mcp template rm).',
  });
}

export function sharedTemplateNameTaken(): ProviderError {
  return new ProviderError('conflict', {
    code: 'shared_template_name',
    detail: "A shared template has that name (create_sandbox's description lists them): choose another name for yours.",
  });
}

export function templateBeingMade(): ProviderError {
  return new ProviderError('conflict', {
    code: 'template_in_progress',
    detail: 'A template of that name is being made by another command right now: wait for it, or choose another name.',
  });
}

export function templateNotFound(): ProviderError {
  return new ProviderError('not_found', {
    code: 'template_not_found',
    detail: 'No template of that name: sandbox-mcp template ls lists them.',
  });
}

export function templateInUse(): ProviderError {
  return new ProviderError('conflict', {
    code: 'template_in_use',
    detail: 'Live sandboxes run on this template (sandbox-mcp template inspect lists them): kill them first, or wait until they end.',
  });
}

export function templatesDirNotPrivate(): ProviderError {
  return new ProviderError('permission_denied', {
    code: 'templates_dir_not_private',
    detail:
      "The templates directory must be this user's alone (mode 0700: its layers hold setuid files): chmod 700 it, or point SANDBOX_MCP_TEMPLATE_DIR at a private directory.",
  });
}

export function snapshotNeedsTemplate(): ProviderError {
  return new ProviderError('unsupported', {
    code: 'snapshot_needs_template',
    detail:
      "Only a sandbox created from a template can be snapshotted: a base sandbox's system is the host's own. Create one with create_sandbox's template (sandbox-mcp template ls lists them).",
  });
}

export function snapshotChainTooLong(): ProviderError {
  return new ProviderError('unsupported', {
    code: 'snapshot_chain_too_long',
    detail:
      'This sandbox runs on a template of too many stacked snapshots: export its files and import them as a new template (sandbox-mcp template import) to start a new stack.',
  });
}

export function imageTooManyLayers(count: number, max: number): ProviderError {
  return new ProviderError('unsupported', {
    code: 'image_too_many_layers',
    detail: `This image has ${count} layers; a template stacks at most ${max}. Squash the image (e.g. docker build --squash, or a multi-stage build) and import it again.`,
  });
}
