// The words a workspace's changes are reported in, for the protocol, the computation and the tools.

/** How a path changed. `mode_changed`: the same content (or link target) with other permissions. */
export const WORKSPACE_CHANGES = ['added', 'modified', 'deleted', 'mode_changed'] as const;
export type WorkspaceChangeKind = (typeof WORKSPACE_CHANGES)[number];

/** What a changed path is (after the change; before it, when deleted). Other file types are not compared. */
export const WORKSPACE_ENTRY_KINDS = ['file', 'symlink', 'directory'] as const;
export type WorkspaceEntryKind = (typeof WORKSPACE_ENTRY_KINDS)[number];

/**
 * Whether a change's content is in the patch: `inline` (it is, unless the patch was cut first), or
 * why not — `binary` (a NUL byte, or not UTF-8), `too_large`, `unreadable`; `none`: nothing to show
 * (a directory, or a mode change git does not record).
 */
export const DIFF_STATES = ['inline', 'binary', 'too_large', 'unreadable', 'none'] as const;
export type DiffState = (typeof DIFF_STATES)[number];

/** Names never compared, wherever they occur: a repository's own files are the repository's business. */
export const EXCLUDED_NAMES: readonly string[] = ['.git'];
