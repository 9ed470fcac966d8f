// How a process enters a template sandbox: helpers/enter.pl, which drops the bounding set to the
// capabilities a template's commands keep before anything of the sandbox's runs (uid 0 inside
// must not exec with the capabilities nsenter would give it). Commands, the shell and the
// resident agent all enter this one way.
import { ProviderError } from '../../provider-error.js';
import { LOCAL_DETAILS } from '../errors.js';
import type { SandboxSpec } from '../sandbox/spec.js';
import { TEMPLATE_COMMAND_CAPS, type TemplateEntry } from './command-lines.js';
import { helpersDir, isHelperArch, readHelper } from './perl-helpers.js';

/** The entry into `spec`'s sandbox when it runs on a template, from the helpers beside `keeperScript`; undefined for a base sandbox. */
export function templateEntryOf(spec: SandboxSpec, keeperScript: string): TemplateEntry | undefined {
  if (!spec.root) return undefined;
  if (!isHelperArch(process.arch))
    throw new ProviderError('unsupported', { code: 'arch_unsupported', detail: LOCAL_DETAILS.archUnsupported });
  const text = readHelper(helpersDir(keeperScript), 'enter');
  return { helper: { text, arch: process.arch }, keepCaps: TEMPLATE_COMMAND_CAPS[spec.root.mode] };
}
