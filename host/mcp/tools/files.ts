// Text file tools (read_file, write_file, list_files) and binary transfer (upload_file,
// download_file). Paths are sandbox paths; relative ones resolve against the sandbox home.
import { createHash } from 'node:crypto';
import * as z from 'zod';
import { ProviderError } from '../../providers/provider-error.js';
import { DirectoryPathSchema, FilePathSchema } from './command-fields.js';
import { DefaultSandboxIdSchema, defineTool, intIn, renewIfOwned, resolveSandbox, type ExtraContent } from './tool.js';

const MIB = 1024 * 1024;
/** read_file returns at most this much text; download_file pages beyond. */
export const READ_FILE_CAP_BYTES = MIB;
/** list_files returns at most this many entries. */
export const LIST_FILES_CAP = 1000;
/** upload_file takes at most this many decoded bytes per call (the HTTP body limit is 4 MiB). */
export const UPLOAD_CAP_BYTES = 3 * MIB;
/** download_file returns at most this many bytes per call. */
export const DOWNLOAD_CAP_BYTES = 4 * MIB;

const readFile = defineTool({
  name: 'read_file',
  title: 'Read text file',
  description:
    'Read a text file as UTF-8 (at most 1 MiB; `truncated` is set beyond, use download_file to page). Binary files are refused: use download_file.',
  input: z.strictObject({ path: FilePathSchema, sandbox_id: DefaultSandboxIdSchema }),
  output: z.strictObject({ path: z.string(), content: z.string(), size: z.number().int(), truncated: z.boolean() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const r = await ctx.deps.providers.get(ref.provider).readFile(ref.id, args.path, { offset: 0, length: READ_FILE_CAP_BYTES });
    if (r.data.includes(0)) {
      throw new ProviderError('invalid_argument', {
        code: 'binary_file',
        detail: 'The file is binary (it contains NUL bytes); read it with download_file.',
      });
    }
    return { result: { path: args.path, content: r.data.toString('utf8'), size: r.size, truncated: r.size > r.data.length } };
  },
});

const writeFile = defineTool({
  name: 'write_file',
  title: 'Write text file',
  description: 'Write UTF-8 text to a file, replacing it and creating parent directories.',
  input: z.strictObject({
    path: FilePathSchema,
    content: z
      .string()
      .max(UPLOAD_CAP_BYTES)
      .describe(
        `The whole new content, as text (written as UTF-8, at most ${UPLOAD_CAP_BYTES} bytes; larger or binary files: upload_file).`,
      ),
    sandbox_id: DefaultSandboxIdSchema,
  }),
  output: z.strictObject({ path: z.string(), bytes_written: z.number().int() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const data = Buffer.from(args.content, 'utf8');
    if (data.length > UPLOAD_CAP_BYTES) throw tooLarge('content', 'write larger files with upload_file in chunks');
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
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
  input: z.strictObject({
    path: DirectoryPathSchema,
    sandbox_id: DefaultSandboxIdSchema,
    depth: intIn(1, 5).default(1).describe('How many levels to list: 1 (default) is the directory itself, up to 5.'),
  }),
  output: z.strictObject({ path: z.string(), entries: z.array(EntrySchema), truncated: z.boolean() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  async run(args, ctx) {
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const entries = await ctx.deps.providers
      .get(ref.provider)
      .listFiles(ref.id, args.path, { depth: args.depth, maxEntries: LIST_FILES_CAP + 1 });
    return { result: { path: args.path, entries: entries.slice(0, LIST_FILES_CAP), truncated: entries.length > LIST_FILES_CAP } };
  },
});

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

const uploadFile = defineTool({
  name: 'upload_file',
  title: 'Upload binary file',
  description:
    'Write base64-encoded bytes to a file (at most 3 MiB decoded per call), creating parent directories; append=true adds to the end (creating the file if missing). ' +
    "For larger files send chunks in order with append=true after the first. Returns the bytes written, the file's size after the write and the sha256 of this chunk " +
    '(as download_file does), so each chunk can be verified; compare size before retrying an append.',
  input: z.strictObject({
    path: FilePathSchema,
    data_base64: z
      .string()
      .max(Math.ceil(UPLOAD_CAP_BYTES / 3) * 4)
      .describe(`The bytes, base64-encoded (standard alphabet, padded; at most ${UPLOAD_CAP_BYTES} bytes decoded).`),
    sandbox_id: DefaultSandboxIdSchema,
    append: z.boolean().default(false).describe('true: add to the end of the file (creating it if missing); false (default): replace it.'),
  }),
  output: z.strictObject({ path: z.string(), bytes_written: z.number().int(), size: z.number().int(), sha256: z.string() }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  async run(args, ctx) {
    if (args.data_base64.length % 4 !== 0 || !BASE64.test(args.data_base64)) {
      throw new ProviderError('invalid_argument', { detail: 'field `data_base64` is not valid base64' });
    }
    const data = Buffer.from(args.data_base64, 'base64');
    if (data.length > UPLOAD_CAP_BYTES) throw tooLarge('data_base64', 'send chunks in order with append=true');
    const ref = resolveSandbox(ctx, args.sandbox_id);
    await renewIfOwned(ctx, ref);
    const { size } = await ctx.deps.providers.get(ref.provider).writeFile(ref.id, args.path, data, { append: args.append });
    return { result: { path: args.path, bytes_written: data.length, size, sha256: sha256(data) } };
  },
});

/** Image types by their leading bytes (never by file name alone). */
function imageMimeType(data: Buffer): string | undefined {
  if (data.subarray(0, 8).equals(Buffer.from('89504e470d0a1a0a', 'hex'))) return 'image/png';
  if (data.subarray(0, 3).equals(Buffer.from('ffd8ff', 'hex'))) return 'image/jpeg';
  if (data.subarray(0, 4).toString('latin1') === 'GIF8') return 'image/gif';
  if (data.subarray(0, 4).toString('latin1') === 'RIFF' && data.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  return undefined;
}

/** Images larger than this come back as base64 only: clients limit image blocks. */
export const IMAGE_BLOCK_CAP_BYTES = MIB;

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

const downloadFile = defineTool({
  name: 'download_file',
  title: 'Download binary file',
  description:
    'Read bytes of a file as base64 (from offset, length 1 B-4 MiB, default 1 MiB), with the file size, eof and the sha256 of this chunk. ' +
    'A whole PNG, JPEG, GIF or WebP image of at most 1 MiB also comes back as an image content block.',
  input: z.strictObject({
    path: FilePathSchema,
    sandbox_id: DefaultSandboxIdSchema,
    offset: z
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .default(0)
      .describe('Byte offset to read from (default 0); for the next chunk, add the returned bytes.'),
    length: intIn(1, DOWNLOAD_CAP_BYTES)
      .default(MIB)
      .describe(`Bytes to read at most (1-${DOWNLOAD_CAP_BYTES}, default ${MIB}); fewer come back at the end of the file.`),
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
    const mimeType = args.offset === 0 && eof && r.data.length <= IMAGE_BLOCK_CAP_BYTES ? imageMimeType(r.data) : undefined;
    const content: ExtraContent[] = mimeType ? [{ type: 'image', data: dataBase64, mimeType }] : [];
    return {
      result: {
        path: args.path,
        offset: args.offset,
        bytes: r.data.length,
        size: r.size,
        eof,
        sha256: sha256(r.data),
        data_base64: dataBase64,
      },
      content,
    };
  },
});

function tooLarge(field: string, hint: string): ProviderError {
  return new ProviderError('invalid_argument', {
    detail: `field \`${field}\` is too large (maximum ${UPLOAD_CAP_BYTES} bytes per call; ${hint})`,
  });
}

/** The five file and transfer tools. */
export const fileTools = [readFile, writeFile, listFiles, uploadFile, downloadFile];
