// What `apply` takes from a sandbox, whichever way it applies it: the new content of each changed
// file (read through the provider, in pieces), checked paths, and the refusal it answers with.
import { ProviderError } from '../providers/provider-error.js';
import type { Provider, SandboxWorkspace } from '../providers/provider.js';
import type { ReportedChange } from '../tasks/workspace-changes.js';

/** A refusal of `apply` that names what is in the way (exit 1). */
export function refused(detail: string): ProviderError {
  return new ProviderError('conflict', { code: 'apply_refused', detail });
}

/** True for a relative path apply may write: `/`-separated names, none empty, `.`, `..` or `.git`. */
export function isSafeRelativePath(path: string): boolean {
  if (path === '' || path.startsWith('/') || path.includes('\0')) return false;
  return path.split('/').every((part) => part !== '' && part !== '.' && part !== '..' && part !== '.git');
}

/** One file's new content, as apply writes or commits it. */
export interface NewContent {
  change: ReportedChange;
  /** The file's bytes, or a symlink's target. */
  data: Buffer;
  /** Permission bits to give it (set-id and sticky bits dropped). */
  mode: number;
}

// Read in pieces: a provider's read is bounded per call.
const READ_CHUNK_BYTES = 4 * 1024 * 1024;

/** The whole file at `path` in the sandbox. */
async function readWhole(provider: Provider, sandboxId: string, path: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const { data, size } = await provider.readFile(sandboxId, path, { offset, length: READ_CHUNK_BYTES });
    parts.push(data);
    offset += data.length;
    if (offset >= size || data.length === 0) return Buffer.concat(parts);
  }
}

/** The new content of every file and symlink the sandbox added, modified or re-moded. */
export async function readNewContent(
  provider: Provider,
  sandboxId: string,
  workspace: SandboxWorkspace,
  changes: readonly ReportedChange[],
): Promise<NewContent[]> {
  const out: NewContent[] = [];
  for (const change of changes) {
    if (change.change === 'deleted' || change.kind === 'directory') continue;
    const mode = parseInt(change.mode_after ?? '0644', 8) & 0o777;
    if (change.kind === 'symlink') {
      if (change.link_target === null) throw refused(`${change.path}: the symlink's target could not be read`);
      out.push({ change, data: Buffer.from(change.link_target, 'utf8'), mode });
    } else out.push({ change, data: await readWhole(provider, sandboxId, `${workspace.path}/${change.path}`), mode });
  }
  return out;
}
