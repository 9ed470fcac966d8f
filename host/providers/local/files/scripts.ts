// File operations run *inside* the sandbox (as its user, in its mount namespace) by small POSIX
// shell scripts, so paths and symlinks resolve in the sandbox's own view and can never reach the
// host's. Each script reports its outcome as an exit status from the table below and metadata
// on fd 3; data travels on stdin/stdout, binary-safe.
import { posix } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import type { FileEntry } from '../../provider.js';

/** Exit statuses of the file scripts (chosen above any status the tools themselves use). */
export const FILE_STATUS = {
  notFound: 80,
  isDirectory: 81,
  notRegular: 82,
  permission: 83,
  notDirectory: 84,
  noSpace: 85,
  toolMissing: 86,
} as const;

/**
 * The programs the scripts use beyond the shell's builtins (a template's root may lack any of them).
 * Each script checks its own first: one missing is a clear error naming it, at once.
 */
const SCRIPT_TOOLS = ['stat', 'cat', 'head', 'tail', 'find'] as const;

/** Exits toolMissing, naming the first of `tools` the root lacks on fd 3, before the script does anything. */
function requireTools(tools: readonly (typeof SCRIPT_TOOLS)[number][]): string {
  return `for t in ${tools.join(' ')}; do command -v "$t" >/dev/null 2>&1 || { printf 'missing:%s' "$t" >&3; exit ${FILE_STATUS.toolMissing}; }; done`;
}

/**
 * Sets r to the parent of the path $1 with builtins alone (no dirname, which a root may lack):
 * trailing slashes go, then the last name. Each round of its loop shortens the path: bounded.
 */
const PARENT_FUNCTION = `parent() { r=$1; while [ "$r" != / ] && [ "\${r%/}" != "$r" ]; do r=\${r%/}; done; case $r in */*) r=\${r%/*}; [ -n "$r" ] || r=/ ;; *) r=. ;; esac; }`;

// Arguments: path, offset (bytes), length (bytes or empty for "to the end").
// Only regular files are read (a FIFO would block until someone writes to it). As in
// WRITE_SCRIPT, what is opened is checked again; a read-write open never blocks on a FIFO a
// process inside swapped in, a read-only one (the fallback for files we may not write) could.
export const READ_SCRIPT = `
${requireTools(['stat', 'tail', 'head'])}
p=$1
[ -e "$p" ] || exit ${FILE_STATUS.notFound}
[ -d "$p" ] && exit ${FILE_STATUS.isDirectory}
[ -f "$p" ] || exit ${FILE_STATUS.notRegular}
[ -r "$p" ] || exit ${FILE_STATUS.permission}
if { [ -w "$p" ] && command exec 5<>"$p"; } 2>/dev/null; then :
elif { command exec 5<"$p"; } 2>/dev/null; then :
else
  [ -e "$p" ] || exit ${FILE_STATUS.notFound}
  exit ${FILE_STATUS.permission}
fi
[ -f /proc/self/fd/5 ] || exit ${FILE_STATUS.notRegular}
stat -L -c %s /proc/self/fd/5 >&3 || exit ${FILE_STATUS.permission}
exec 3>&-
if [ -n "$3" ]; then tail -c +$(($2 + 1)) <&5 | head -c "$3"; else tail -c +$(($2 + 1)) <&5; fi
`;

// Arguments: path, mode (w = overwrite, a = append). Data on stdin.
// Only regular files are written: a FIFO would block the open until someone reads it, a device
// or socket is no file. The path is opened read-write first, which never blocks on a FIFO, and
// what was opened is checked (a process inside may swap the path after the tests above); the
// data then goes through /proc/self/fd/5, i.e. into the very file checked. A file the sandbox
// user may write but not read cannot be opened so; it is opened for appending (after the same checks).
export const WRITE_SCRIPT = `
${requireTools(['stat', 'cat'])}
${PARENT_FUNCTION}
p=$1
parent "$p"; d=$r
if [ ! -d "$d" ]; then
  if ! mkdir -p -- "$d" 2>/dev/null; then
    e=$d
    while [ ! -e "$e" ] && [ ! -L "$e" ] && [ "$e" != / ] && [ "$e" != . ]; do parent "$e"; e=$r; done
    [ -d "$e" ] && exit ${FILE_STATUS.permission}
    exit ${FILE_STATUS.notDirectory}
  fi
fi
[ -d "$p" ] && exit ${FILE_STATUS.isDirectory}
if [ -e "$p" ] && [ ! -f "$p" ]; then exit ${FILE_STATUS.notRegular}; fi
if [ -e "$p" ] && [ ! -w "$p" ]; then exit ${FILE_STATUS.permission}; fi
if [ ! -e "$p" ] && [ ! -w "$d" ]; then exit ${FILE_STATUS.permission}; fi
if ! { command exec 5<>"$p"; } 2>/dev/null; then
  if [ -f "$p" ] && [ -w "$p" ] && [ ! -r "$p" ] && { command exec 5>>"$p"; } 2>/dev/null; then :; else
    # A dangling symlink whose target directory does not exist (in the sandbox's view).
    [ -L "$p" ] && [ ! -e "$p" ] && exit ${FILE_STATUS.notFound}
    if [ -e "$p" ] && [ ! -f "$p" ]; then exit ${FILE_STATUS.notRegular}; fi
    [ -w "$d" ] || exit ${FILE_STATUS.permission}
    exit ${FILE_STATUS.noSpace}
  fi
fi
[ -f /proc/self/fd/5 ] || exit ${FILE_STATUS.notRegular}
if [ "$2" = a ]; then cat >> /proc/self/fd/5; else cat > /proc/self/fd/5; fi 2>/dev/null || {
  [ -w /proc/self/fd/5 ] || exit ${FILE_STATUS.permission}
  exit ${FILE_STATUS.noSpace}
}
stat -L -c %s /proc/self/fd/5 >&3
`;

// Arguments: path, depth, max entries. Breadth first (one find per level), so a capped listing
// keeps the shallow entries. Records: type TAB size TAB mtime TAB path NUL.
export const LIST_SCRIPT = `
${requireTools(['find', 'head'])}
p=$1
[ -e "$p" ] || exit ${FILE_STATUS.notFound}
[ -d "$p" ] || exit ${FILE_STATUS.notDirectory}
[ -r "$p" ] && [ -x "$p" ] || exit ${FILE_STATUS.permission}
i=1
while [ "$i" -le "$2" ]; do
  find -H "$p" -mindepth "$i" -maxdepth "$i" -printf '%y\\t%s\\t%T@\\t%p\\0' 2>/dev/null
  i=$((i + 1))
done | head -z -n "$3"
exit 0
`;

/** Maps a file script's exit status (and, for a missing tool, what it wrote on fd 3) to the ProviderError it means (null for success). */
export function fileStatusError(exitCode: number | null, meta: Buffer = Buffer.alloc(0)): ProviderError | null {
  switch (exitCode) {
    case FILE_STATUS.toolMissing:
      return toolMissing(meta);
    case 0:
      return null;
    case FILE_STATUS.notFound:
      return new ProviderError('not_found', { code: 'ENOENT', detail: 'No such file or directory in the sandbox.' });
    case FILE_STATUS.isDirectory:
      return new ProviderError('invalid_argument', { code: 'EISDIR', detail: 'The path is a directory.' });
    case FILE_STATUS.notRegular:
      return new ProviderError('invalid_argument', { code: 'ENOTREG', detail: 'The path is not a regular file.' });
    case FILE_STATUS.permission:
      return new ProviderError('permission_denied', {
        code: 'EACCES',
        detail: 'The sandbox user may not access this path (outside /home/user and /tmp the sandbox is read-only).',
      });
    case FILE_STATUS.notDirectory:
      return new ProviderError('invalid_argument', { code: 'ENOTDIR', detail: 'A component of the path is not a directory.' });
    case FILE_STATUS.noSpace:
      return new ProviderError('insufficient_resources', {
        code: 'ENOSPC',
        detail:
          "The write failed: the sandbox's writable mount is full (its share of the disk budget) or its memory is: remove files you no longer need " +
          '(run_command with rm), write less, or give sandboxes more with --sandbox-disk (SANDBOX_MCP_SANDBOX_DISK; files count against the memory limit too).',
      });
    default:
      return new ProviderError('internal');
  }
}

/** The missing tool's error, naming it only when it is one the scripts use (the text comes from inside the sandbox). */
function toolMissing(meta: Buffer): ProviderError {
  const name = meta.toString('utf8').replace(/^missing:/, '');
  const tool = (SCRIPT_TOOLS as readonly string[]).includes(name) ? `\`${name}\`` : 'a program';
  return new ProviderError('unsupported', {
    code: 'tool_missing',
    detail: `This sandbox's root has no ${tool} (on its PATH), which file operations need: use a template that has it (coreutils, findutils), or read and write files with run_command.`,
  });
}

const TYPES: Record<string, FileEntry['type']> = { f: 'file', d: 'directory', l: 'symlink' };

/** Parses LIST_SCRIPT output into entries sorted by path. */
export function parseListing(out: Buffer): FileEntry[] {
  const entries: FileEntry[] = [];
  for (const record of out.toString('utf8').split('\0')) {
    if (record === '') continue;
    const parts = record.split('\t');
    if (parts.length < 4) continue;
    const [type, size, mtime] = parts;
    const path = parts.slice(3).join('\t');
    const seconds = Number(mtime);
    entries.push({
      name: posix.basename(path),
      path,
      type: TYPES[type ?? ''] ?? 'other',
      size: Number(size) || 0,
      modified_at: Number.isFinite(seconds) ? new Date(Math.round(seconds * 1000)).toISOString() : null,
    });
  }
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
