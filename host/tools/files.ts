// Text file tools (read_file, write_file, list_files) and binary transfer (upload_file,
// download_file). Paths are sandbox paths; relative ones resolve against the sandbox home.
import { createHash } from 'node:crypto';
import * as z from 'zod';
import { ProviderError } from '../errors.js';
import { SandboxIdSchema, defineTool, intIn, renewIfOwned, resolveSandbox, shellQuote, type ExtraContent } from './tool.js';

const MIB = 1024 * 1024;
/** read_file returns at most this much text; download_file pages beyond. */
export const READ_FILE_CAP_BYTES = MIB;
/** list_files returns at most this many entries. */
export const LIST_FILES_CAP = 1000;
/** upload_file takes at most this many decoded bytes per call (the HTTP body limit is 4 MiB). */
export const UPLOAD_CAP_BYTES = 3 * MIB;
/** download_file returns at most this many bytes per call. */
export const DOWNLOAD_CAP_BYTES = 4 * MIB;

const PathSchema = z.string().min(1).max(4096);

const readFile = defineTool({
  name: 'read_file',
  title: 'Read text file',
  description: 'Read a file as UTF-8 text (at most 1 MiB; `truncated` is set beyond, use download_file to page).',
  input: z.strictObject({ path: PathSchema, sandbox_id: SandboxIdSchema.optional() }),
  output: z.strictObject({ path: z.string(), content: z.string(), size: z.number().int(), truncated: z.boolean() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const r = await ctx.deps.providers.get(ref.provider).readFile(ref.id, args.path, { offset: 0, length: READ_FILE_CAP_BYTES });
    return { result: { path: args.path, content: r.data.toString('utf8'), size: r.size, truncated: r.size > r.data.length } };
  },
});

const writeFile = defineTool({
  name: 'write_file',
  title: 'Write text file',
  description: 'Write UTF-8 text to a file, replacing it and creating parent directories.',
  input: z.strictObject({ path: PathSchema, content: z.string().max(UPLOAD_CAP_BYTES), sandbox_id: SandboxIdSchema.optional() }),
  output: z.strictObject({ path: z.string(), bytes_written: z.number().int() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const data = Buffer.from(args.content, 'utf8');
    if (data.length > UPLOAD_CAP_BYTES) throw tooLarge('content');
    await ctx.deps.providers.get(ref.provider).writeFile(ref.id, args.path, data);
    return { result: { path: args.path, bytes_written: data.length } };
  },
});

const EntrySchema = z.strictObject({
  name: z.string(),
  path: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  size: z.number().int(),
  modified_at: z.string().nullable(),
});

const listFiles = defineTool({
  name: 'list_files',
  title: 'List files',
  description: 'List a directory (depth 1-5, default 1), at most 1000 entries (`truncated` set beyond).',
  input: z.strictObject({ path: PathSchema, sandbox_id: SandboxIdSchema.optional(), depth: intIn(1, 5).default(1) }),
  output: z.strictObject({ path: z.string(), entries: z.array(EntrySchema), truncated: z.boolean() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const entries = await ctx.deps.providers.get(ref.provider).listFiles(ref.id, args.path, { depth: args.depth, maxEntries: LIST_FILES_CAP + 1 });
    return { result: { path: args.path, entries: entries.slice(0, LIST_FILES_CAP), truncated: entries.length > LIST_FILES_CAP } };
  },
});

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const uploadFile = defineTool({
  name: 'upload_file',
  title: 'Upload binary file',
  description:
    'Write base64-encoded bytes to a file (at most 3 MiB decoded per call), creating parent directories. For larger files send chunks in order with append=true after the first. ' +
    'Returns the bytes written, the file\'s size and the sha256 of the whole file after this write.',
  input: z.strictObject({
    path: PathSchema,
    data_base64: z.string().max(Math.ceil(UPLOAD_CAP_BYTES / 3) * 4),
    sandbox_id: SandboxIdSchema.optional(),
    append: z.boolean().default(false),
  }),
  output: z.strictObject({ path: z.string(), bytes_written: z.number().int(), size: z.number().int(), sha256: z.string() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    if (args.data_base64.length % 4 !== 0 || !BASE64.test(args.data_base64)) {
      throw new ProviderError('invalid_argument', { detail: 'field `data_base64` is not valid base64' });
    }
    const data = Buffer.from(args.data_base64, 'base64');
    if (data.length > UPLOAD_CAP_BYTES) throw tooLarge('data_base64');
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const provider = ctx.deps.providers.get(ref.provider);
    const { size } = await provider.writeFile(ref.id, args.path, data, { append: args.append });
    // Hash inside the sandbox so a chunked upload can be verified end to end without reading it back.
    const hashed = await provider.exec(ref.id, `cd "$HOME" && sha256sum < ${shellQuote(args.path)}`, { timeoutS: 120, maxOutputBytes: 4096 });
    const sha256 = /^[0-9a-f]{64}/.exec(hashed.stdout.toString('utf8'))?.[0];
    if (hashed.exitCode !== 0 || !sha256) throw new ProviderError('internal', { code: 'hash_failed', detail: 'The file was written but its sha256 could not be computed in the sandbox.' });
    return { result: { path: args.path, bytes_written: data.length, size, sha256 } };
  },
});

const IMAGE_TYPES: Record<string, string> = {
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
};

const downloadFile = defineTool({
  name: 'download_file',
  title: 'Download binary file',
  description:
    'Read bytes of a file as base64 (from offset, length 1 B-4 MiB, default 1 MiB), with the file size, eof and the sha256 of this chunk. ' +
    'Images (png, jpeg, gif, webp) read whole also come back as an image content block.',
  input: z.strictObject({
    path: PathSchema,
    sandbox_id: SandboxIdSchema.optional(),
    offset: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
    length: intIn(1, DOWNLOAD_CAP_BYTES).default(MIB),
  }),
  output: z.strictObject({
    path: z.string(),
    offset: z.number().int(),
    bytes: z.number().int(),
    size: z.number().int(),
    eof: z.boolean(),
    sha256: z.string(),
    data_base64: z.string(),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const r = await ctx.deps.providers.get(ref.provider).readFile(ref.id, args.path, { offset: args.offset, length: args.length });
    const dataBase64 = r.data.toString('base64');
    const eof = args.offset + r.data.length >= r.size;
    const mimeType = IMAGE_TYPES[args.path.split('.').pop()?.toLowerCase() ?? ''];
    const content: ExtraContent[] = mimeType && args.offset === 0 && eof ? [{ type: 'image', data: dataBase64, mimeType }] : [];
    return {
      result: {
        path: args.path,
        offset: args.offset,
        bytes: r.data.length,
        size: r.size,
        eof,
        sha256: createHash('sha256').update(r.data).digest('hex'),
        data_base64: dataBase64,
      },
      content,
    };
  },
});

function tooLarge(field: string): ProviderError {
  return new ProviderError('invalid_argument', { detail: `field \`${field}\` is too large (maximum ${UPLOAD_CAP_BYTES} bytes per call; send chunks with append)` });
}

/** The five file and transfer tools. */
export const fileTools = [readFile, writeFile, listFiles, uploadFile, downloadFile];
