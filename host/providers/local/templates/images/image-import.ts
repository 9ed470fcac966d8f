// Container images made into a template's layers: what an image on disk is (an OCI layout, as a
// directory or a tar archive, or what `docker save` writes), and each of its layers written as a
// store layer of its own on the ones under it (layer-stack.ts), identified by its chain id, after
// it is checked against its digest.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { ProviderError } from '../../../provider-error.js';
import { findExecutable } from '../../system/preflight.js';
import type { LayerOwners } from '../store.js';
import { directoryFiles, isPlainTar, tarFiles, type ImageFiles } from './image-files.js';
import { digestMismatch, resolveDockerArchive, resolveOciLayout, verifyBlob, type ResolvedImage } from './image-manifest.js';
import type { CopyMeta } from '../copy-meta.js';
import { writeStackLayer, type StackLayer, type WrittenLayer } from './layer-stack.js';

/** An image found at a path, ready to apply. */
export interface ImageOnDisk {
  files: ImageFiles;
  image: ResolvedImage;
}

function isFile(path: string): boolean {
  return statSync(path, { throwIfNoEntry: false })?.isFile() === true;
}

/**
 * The image at `source` (a directory or an uncompressed tar archive) when it holds one — an OCI
 * layout (`oci-layout` and `index.json`) or a docker-archive (`manifest.json`) — else null: a
 * plain root filesystem, imported as before. `blobsDir`: where a layout's blobs are (a pull's
 * shared blob store).
 */
export function openImage(source: string, blobsDir?: string): ImageOnDisk | null {
  let files: ImageFiles;
  if (statSync(source).isDirectory()) {
    // A root filesystem has /bin; an image's files never do.
    if (isFile(join(source, 'bin/sh')) || statSync(join(source, 'bin'), { throwIfNoEntry: false })) return null;
    files = directoryFiles(source, blobsDir);
  } else {
    if (!isPlainTar(source)) return null;
    files = tarFiles(source);
  }
  if (files.has('oci-layout') && files.has('index.json')) return { files, image: resolveOciLayout(files) };
  if (files.has('manifest.json') && !files.has('bin/sh')) return { files, image: resolveDockerArchive(files) };
  return null;
}

/** A layer's uncompressed tar stream: gzip and zstd are recognised by their first bytes. */
async function* uncompressed(raw: Readable): AsyncGenerator<Buffer> {
  const it = raw[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const first = await it.next();
  if (first.done) return;
  const head = first.value;
  const rest = (async function* () {
    yield head;
    for (let r = await it.next(); !r.done; r = await it.next()) yield r.value;
  })();
  if (head[0] === 0x1f && head[1] === 0x8b) {
    const gunzip = zlib.createGunzip();
    pump(rest, gunzip).catch(() => undefined);
    yield* gunzip as AsyncIterable<Buffer>;
  } else if (head.readUInt32LE(0) === 0xfd2fb528) {
    yield* zstdDecompress(rest);
  } else {
    yield* rest;
  }
}

/** Writes `from` into a transform stream, ending it; errors go to the stream. */
async function pump(from: AsyncIterable<Buffer>, to: NodeJS.WritableStream & { destroy(e?: Error): void }): Promise<void> {
  try {
    for await (const chunk of from) if (!to.write(chunk)) await new Promise((r) => to.once('drain', r));
    to.end();
  } catch (e) {
    to.destroy(e as Error);
  }
}

/** zstd: Node's own where it has it (22.15+), else the `zstd` program. */
async function* zstdDecompress(from: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const create = (zlib as unknown as { createZstdDecompress?: () => NodeJS.ReadWriteStream & { destroy(e?: Error): void } })
    .createZstdDecompress;
  if (create) {
    const z = create();
    pump(from, z).catch(() => undefined);
    yield* z as AsyncIterable<Buffer>;
    return;
  }
  const zstd = findExecutable('zstd');
  if (!zstd) {
    throw new ProviderError('unavailable', {
      code: 'zstd_missing',
      detail: 'The image has zstd-compressed layers: install zstd (apt-get install zstd) or run on Node.js 22.15 or later.',
    });
  }
  const child = spawn(zstd, ['-dc'], { stdio: ['pipe', 'pipe', 'ignore'] });
  const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
  pump(from, child.stdin).catch(() => undefined);
  yield* child.stdout as AsyncIterable<Buffer>;
  if ((await exited) !== 0)
    throw new ProviderError('invalid_argument', { code: 'layer_not_tar', detail: 'A zstd layer could not be decompressed.' });
}

/**
 * The OCI chain ids of layers with these diff ids, bottom first: a layer's is its diff id for the
 * bottom one, else sha256 of the chain id under it, a space and its diff id. Equal chain ids mean
 * the same layer on the same layers below: the same files in the merged view.
 */
export function chainIds(diffIds: readonly string[]): string[] {
  const out: string[] = [];
  for (const diffId of diffIds) {
    const below = out[out.length - 1];
    out.push(below === undefined ? diffId : `sha256:${createHash('sha256').update(`${below} ${diffId}`).digest('hex')}`);
  }
  return out;
}

/** The store's id of the image layer with chain id `chainId` made for `owners`: the same for every template that has it. */
export function imageLayerId(chainId: string, owners: LayerOwners): string {
  return createHash('sha256').update(`sandbox-mcp image layer\0${owners}\0${chainId}`).digest('hex').slice(0, 16);
}

/** Passes a stream on, hashing it. */
async function* hashing(from: AsyncIterable<Buffer>, hash: ReturnType<typeof createHash>): AsyncGenerator<Buffer> {
  for await (const chunk of from) {
    hash.update(chunk);
    yield chunk;
  }
}

/**
 * Writes the image's layer `index` into `root` (which does not exist yet) as a layer of its own on
 * `lowers` (the store layers of the image layers under it, top first; layer-stack.ts). Its blob is
 * checked against its digest before a byte of it is used, and its uncompressed tar against its
 * diff id as it is read (a mismatch throws; the caller drops what was written).
 */
export async function applyImageLayer(
  root: string,
  disk: ImageOnDisk,
  index: number,
  lowers: readonly StackLayer[],
  meta: CopyMeta,
  owners: LayerOwners,
): Promise<WrittenLayer> {
  const layer = disk.image.layers[index]!;
  await verifyBlob(disk.files, layer.path, layer.digest);
  const [alg] = layer.diffId.split(':');
  const hash = createHash(alg!);
  let written: WrittenLayer;
  try {
    written = await writeStackLayer(root, lowers, hashing(uncompressed(disk.files.open(layer.path)), hash), meta, owners);
  } catch (e) {
    if (e instanceof ProviderError) throw e;
    if ((e as { code?: string }).code?.startsWith('Z_')) {
      throw new ProviderError('invalid_argument', { code: 'layer_not_tar', detail: `The layer ${layer.digest} cannot be decompressed.` });
    }
    throw e;
  }
  if (`${alg}:${hash.digest('hex')}` !== layer.diffId) throw digestMismatch(layer.diffId);
  return written;
}
