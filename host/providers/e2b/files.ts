// Files on a connected sandbox, by absolute path (the provider resolves paths by the contract's
// rule before connecting). envd's upload creates parent directories. Failures are the SDK's own
// errors, unmapped, or ProviderErrors of our own; the provider maps them.
import { randomBytes } from 'node:crypto';
import type { Sandbox } from 'e2b';
import { ProviderError } from '../provider-error.js';
import {
  SANDBOX_HOME,
  type FileEntry,
  type ListFilesOpts,
  type ReadFileOpts,
  type ReadFileResult,
  type WriteFileOpts,
} from '../provider.js';
import { runHelperScript } from './commands.js';

/** Where an append's chunk waits before it is concatenated (removed afterwards, whatever happens). */
const APPEND_TMP_PREFIX = '/tmp/.sandbox-mcp-append-';

/** A sandbox path as a shell word: under the home it is written relative to $HOME. */
function shellPathExpr(p: string): { expr: string; env: Record<string, string> } {
  const key = `P${randomBytes(4).toString('hex')}`;
  if (p === SANDBOX_HOME || p.startsWith(SANDBOX_HOME + '/'))
    return { expr: `"$HOME/\${${key}}"`, env: { [key]: p.slice(SANDBOX_HOME.length + 1) } };
  return { expr: `"\${${key}}"`, env: { [key]: p } };
}

function toArrayBuffer(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}

function fileType(t: string | undefined): FileEntry['type'] {
  return t === 'dir' ? 'directory' : t === 'file' ? 'file' : t === 'symlink' ? 'symlink' : 'other';
}

/**
 * Bytes [offset, offset + length) of the file at `absPath` and the whole file's size. The read
 * streams and stops at the end of the range, so a chunked download of a large file does not
 * transfer the whole file each time (bytes before offset are still read). A directory is invalid_argument.
 */
export async function readFile(sandbox: Sandbox, absPath: string, o: ReadFileOpts = {}): Promise<ReadFileResult> {
  const info = await sandbox.files.getInfo(absPath);
  if (info.type === 'dir')
    throw new ProviderError('invalid_argument', { code: 'IsADirectory', detail: 'The path is a directory; use list_files.' });
  const size = info.size;
  const start = Math.min(o.offset ?? 0, size);
  const end = Math.min(size, o.length !== undefined ? start + o.length : size);
  if (end <= start) return { data: Buffer.alloc(0), size };
  const reader = (await sandbox.files.read(absPath, { format: 'stream' })).getReader();
  const parts: Buffer[] = [];
  let pos = 0;
  try {
    while (pos < end) {
      const { done, value } = await reader.read();
      if (done) break;
      const chunk = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
      const from = Math.max(0, start - pos);
      const to = Math.min(chunk.length, end - pos);
      if (to > from) parts.push(Buffer.from(chunk.subarray(from, to)));
      pos += chunk.length;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return { data: Buffer.concat(parts), size };
}

/**
 * Writes (or with `append`, appends) `data` to the file at `absPath`, creating parents; returns the
 * file's size after the write. An append uploads the chunk to a temporary file and concatenates it
 * in the sandbox: binary-safe, and the existing content never travels.
 */
export async function writeFile(sandbox: Sandbox, absPath: string, data: Buffer, o: WriteFileOpts = {}): Promise<{ size: number }> {
  if (!o.append) {
    await sandbox.files.write(absPath, toArrayBuffer(data), { useOctetStream: true });
    return { size: data.length };
  }
  const tmp = `${APPEND_TMP_PREFIX}${randomBytes(8).toString('hex')}`;
  await sandbox.files.write(tmp, toArrayBuffer(data), { useOctetStream: true });
  const target = shellPathExpr(absPath);
  // The parent by parameter expansion, not dirname (builtins only: absPath is absolute and normalised).
  const script = `t=${target.expr}; d=\${t%/*}; mkdir -p -- "\${d:-/}" && cat -- "$SRC" >> "$t"; rc=$?; rm -f -- "$SRC"; [ "$rc" -eq 0 ] && stat -c %s -- "$t"`;
  const out = await runHelperScript(sandbox, script, { ...target.env, SRC: tmp });
  const size = Number.parseInt(out.trim(), 10);
  if (!Number.isFinite(size)) throw new ProviderError('internal', { code: 'AppendFailed' });
  return { size };
}

/** Entries under `absPath` to `depth` levels, at most `maxEntries` of them, as FileEntry. */
export async function listFiles(sandbox: Sandbox, absPath: string, o: ListFilesOpts): Promise<FileEntry[]> {
  const entries = await sandbox.files.list(absPath, { depth: o.depth });
  return entries.slice(0, o.maxEntries).map((e) => ({
    name: e.name,
    path: e.path,
    type: fileType(e.type),
    size: e.size,
    modified_at: e.modifiedTime instanceof Date && !Number.isNaN(e.modifiedTime.getTime()) ? e.modifiedTime.toISOString() : null,
  }));
}
