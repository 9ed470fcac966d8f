// Which host directories a sandbox may be given as its workspace, once for the configuration, the
// tools and both providers: the person names directories (--workspace-allow); create_sandbox's
// `workspace` must resolve — symlinks and `..` followed, as the kernel would — to one of them or a
// directory below one. Errors name the field or the flag, never the path.
import { realpathSync, statSync } from 'node:fs';
import { isAbsolute, sep } from 'node:path';
import { ProviderError } from './provider-error.js';

/** The flag and variable that permit workspaces, as every refusal names them. */
export const WORKSPACE_ALLOW_FLAG = '--workspace-allow';
export const WORKSPACE_ALLOW_ENV = 'SANDBOX_MCP_WORKSPACE_ALLOW';

/** Why an item of the permitted set cannot be one: not absolute, or not an existing directory. */
export type AllowedRootProblem = 'not_absolute' | 'not_a_directory';

/**
 * The permitted directories as real paths (symlinks resolved, duplicates dropped), or the first
 * item that cannot be one and why.
 */
export function resolveAllowedRoots(items: readonly string[]): { roots: string[] } | { invalidIndex: number; problem: AllowedRootProblem } {
  const roots: string[] = [];
  for (const [index, item] of items.entries()) {
    if (!isAbsolute(item)) return { invalidIndex: index, problem: 'not_absolute' };
    const real = realDirectory(item);
    if (real === null) return { invalidIndex: index, problem: 'not_a_directory' };
    if (!roots.includes(real)) roots.push(real);
  }
  return { roots };
}

/** The real path of an existing directory, or null. */
function realDirectory(path: string): string | null {
  try {
    const real = realpathSync(path);
    return statSync(real).isDirectory() ? real : null;
  } catch {
    return null;
  }
}

/** True when `path` is `root` or lies below it (both real paths). */
export function isWithin(path: string, root: string): boolean {
  return path === root || root === sep || path.startsWith(root + sep);
}

function refused(code: string, detail: string): ProviderError {
  return new ProviderError('permission_denied', { code, detail });
}

/**
 * The real path of the directory create_sandbox's `workspace` names, checked against the permitted
 * `roots` (real paths, from resolveAllowedRoots) after every symlink and `..` in it is resolved.
 * Throws permission_denied (code workspaces_not_allowed) when the server permits none, naming the
 * flag; invalid_argument naming `workspace` for a path that is not absolute or not an existing
 * directory; permission_denied (code workspace_not_allowed) for one outside every root.
 */
export function resolveWorkspaceArg(path: string, roots: readonly string[]): string {
  if (roots.length === 0) {
    throw refused(
      'workspaces_not_allowed',
      `This server offers no workspaces: the person running it permits directories with ${WORKSPACE_ALLOW_FLAG} DIR[,DIR...] (or ${WORKSPACE_ALLOW_ENV}).`,
    );
  }
  if (path.includes('\0') || !isAbsolute(path)) {
    throw new ProviderError('invalid_argument', {
      code: 'workspace_not_absolute',
      detail: "field `workspace` must be an absolute path of a directory on the server's machine.",
    });
  }
  const real = realDirectory(path);
  if (real === null) {
    throw new ProviderError('invalid_argument', {
      code: 'workspace_not_found',
      detail: "field `workspace` is not an existing directory on the server's machine.",
    });
  }
  if (!roots.some((root) => isWithin(real, root))) {
    throw refused(
      'workspace_not_allowed',
      `field \`workspace\` resolves (symlinks and .. followed) to a directory outside those the server's ${WORKSPACE_ALLOW_FLAG} permits.`,
    );
  }
  return real;
}
