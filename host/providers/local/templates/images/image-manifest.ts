// Which image an OCI layout or a docker-archive holds, and what it is made of: its layers (in
// order, bottom first), its config (Env, WorkingDir, User…) and its digest. An index (or docker's
// manifest list) is resolved to this machine's platform. Every document and every blob is checked
// against its digest before it is used; a mismatch is refused naming the digest.
import { createHash } from 'node:crypto';
import * as z from 'zod';
import { ProviderError } from '../../../provider-error.js';
import type { ImageInfo, ImageRunConfig } from '../store.js';
import type { ImageFiles } from './image-files.js';

const DIGEST = /^(sha256|sha512):([0-9a-f]{64}|[0-9a-f]{128})$/;
const INDEX_TYPES = new Set(['application/vnd.oci.image.index.v1+json', 'application/vnd.docker.distribution.manifest.list.v2+json']);
/** How deep an index of indexes is followed. */
const MAX_INDEX_DEPTH = 4;

/** An image found on disk: its identity, config and where its layers are. */
export interface ResolvedImage {
  format: 'oci-layout' | 'docker-archive';
  info: Omit<ImageInfo, 'reference'>;
  /**
   * Bottom first: each layer's file, the digest its bytes must have, and its diff id (the digest
   * of its uncompressed tar, from the config: what its chain id is made of).
   */
  layers: { path: string; digest: string; diffId: string }[];
}

/** This machine's platform as images name it. */
export function hostPlatform(): { os: string; architecture: string } {
  const architecture = process.arch === 'x64' ? 'amd64' : process.arch === 'ia32' ? '386' : process.arch;
  return { os: 'linux', architecture };
}

function refused(code: string, detail: string): ProviderError {
  return new ProviderError('invalid_argument', { code, detail });
}

/** Refusal of content that does not match its digest (naming the digest: it is not a secret, and says which blob). */
export function digestMismatch(digest: string): ProviderError {
  return refused(
    'blob_digest_mismatch',
    `The image's blob ${digest} does not match its digest: it is damaged or was tampered with. Nothing was kept.`,
  );
}

function checkDigestSyntax(digest: unknown): string {
  if (typeof digest !== 'string' || !DIGEST.test(digest))
    throw refused('image_bad_digest', 'The image names a blob by a digest that is not sha256 or sha512.');
  return digest;
}

/** Hashes `path` and refuses it unless its digest is `digest`. */
export async function verifyBlob(files: ImageFiles, path: string, digest: string): Promise<void> {
  const [alg] = checkDigestSyntax(digest).split(':');
  const hash = createHash(alg!);
  for await (const chunk of files.open(path)) hash.update(chunk as Buffer);
  if (`${alg}:${hash.digest('hex')}` !== digest) throw digestMismatch(digest);
}

function blobPath(digest: string): string {
  return `blobs/${checkDigestSyntax(digest).replace(':', '/')}`;
}

/** A JSON document by digest, checked. */
function readBlobJson(files: ImageFiles, digest: string): unknown {
  const path = blobPath(digest);
  if (!files.has(path)) throw refused('image_blob_missing', `The image lacks the blob ${digest}.`);
  const bytes = files.read(path);
  const [alg, hex] = digest.split(':');
  if (createHash(alg!).update(bytes).digest('hex') !== hex) throw digestMismatch(digest);
  return parseJson(bytes);
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch {
    throw refused('image_bad_json', "An image's JSON document cannot be read.");
  }
}

const DescriptorSchema = z.object({
  mediaType: z.string().optional(),
  digest: z.string(),
  platform: z.object({ os: z.string(), architecture: z.string() }).partial().optional(),
});
const IndexSchema = z.object({ manifests: z.array(DescriptorSchema) });
const ManifestSchema = z.object({ config: DescriptorSchema, layers: z.array(DescriptorSchema) });
const ConfigSchema = z.object({
  os: z.string().optional(),
  architecture: z.string().optional(),
  config: z
    .object({
      Env: z.array(z.string()).nullish(),
      WorkingDir: z.string().nullish(),
      User: z.string().nullish(),
      Entrypoint: z.array(z.string()).nullish(),
      Cmd: z.array(z.string()).nullish(),
    })
    .nullish(),
  rootfs: z.object({ diff_ids: z.array(z.string()) }).optional(),
});
type ImageConfigDoc = z.infer<typeof ConfigSchema>;

function parseAs<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw refused('image_bad_document', `The image's ${what} is not one this server can read.`);
  return parsed.data;
}

function runConfig(doc: ImageConfigDoc): ImageRunConfig {
  const c = doc.config ?? {};
  return { env: c.Env ?? [], working_dir: c.WorkingDir ?? '', user: c.User ?? '', entrypoint: c.Entrypoint ?? null, cmd: c.Cmd ?? null };
}

/** The manifests an index lists (indexes inside followed), each with the platform its descriptor names. */
function manifestsOf(files: ImageFiles, index: z.infer<typeof IndexSchema>, depth: number): z.infer<typeof DescriptorSchema>[] {
  const out: z.infer<typeof DescriptorSchema>[] = [];
  for (const d of index.manifests) {
    if (d.mediaType !== undefined && INDEX_TYPES.has(d.mediaType)) {
      if (depth >= MAX_INDEX_DEPTH) throw refused('image_index_too_deep', 'The image index nests too deeply.');
      out.push(...manifestsOf(files, parseAs(IndexSchema, readBlobJson(files, d.digest), 'index'), depth + 1));
    } else out.push(d);
  }
  return out;
}

/** Reads the image of an OCI layout (its index.json) for this machine's platform. */
export function resolveOciLayout(files: ImageFiles): ResolvedImage {
  const index = parseAs(IndexSchema, parseJson(files.read('index.json')), 'index.json');
  const want = hostPlatform();
  const candidates = manifestsOf(files, index, 0).map((d) => {
    const manifest = parseAs(ManifestSchema, readBlobJson(files, d.digest), 'manifest');
    const config = parseAs(ConfigSchema, readBlobJson(files, manifest.config.digest), 'config');
    return { digest: d.digest, manifest, config, os: d.platform?.os ?? config.os, arch: d.platform?.architecture ?? config.architecture };
  });
  if (candidates.length === 0) throw refused('image_empty', 'The OCI layout holds no image.');
  const matching = candidates.filter((c) => (c.os ?? 'linux') === want.os && (c.arch ?? want.architecture) === want.architecture);
  const distinct = [...new Map(matching.map((c) => [c.digest, c])).values()];
  if (distinct.length === 0) {
    throw refused(
      'image_platform_unknown',
      `The image has no variant for this machine's platform (${want.os}/${want.architecture}); it has ${[...new Set(candidates.map((c) => `${c.os ?? '?'}/${c.arch ?? '?'}`))].join(', ')}.`,
    );
  }
  if (distinct.length > 1)
    throw refused('image_ambiguous', 'The OCI layout holds several images for this platform: import a layout of one.');
  const chosen = distinct[0]!;
  const diffIds = chosen.config.rootfs?.diff_ids ?? [];
  if (diffIds.length !== chosen.manifest.layers.length)
    throw refused('image_bad_document', "The image's config does not list its layers (rootfs.diff_ids).");
  return {
    format: 'oci-layout',
    info: {
      digest: chosen.digest,
      platform: `${chosen.os ?? want.os}/${chosen.arch ?? want.architecture}`,
      config: runConfig(chosen.config),
      layers: chosen.manifest.layers.map((l) => l.digest),
    },
    layers: chosen.manifest.layers.map((l, i) => ({ path: blobPath(l.digest), digest: l.digest, diffId: checkDigestSyntax(diffIds[i]) })),
  };
}

const DockerManifestSchema = z.array(z.object({ Config: z.string(), Layers: z.array(z.string()) }));

/** Reads the image of a docker-archive (`docker save`): its manifest.json, which must list one image. */
export function resolveDockerArchive(files: ImageFiles): ResolvedImage {
  const manifest = parseAs(DockerManifestSchema, parseJson(files.read('manifest.json')), 'manifest.json');
  if (manifest.length !== 1) throw refused('image_ambiguous', 'The archive holds several images: save one image per archive.');
  const { Config, Layers } = manifest[0]!;
  const configBytes = files.read(Config);
  const configDigest = `sha256:${createHash('sha256').update(configBytes).digest('hex')}`;
  // The config is named by its digest (`<hex>.json`, or `blobs/sha256/<hex>` in newer archives).
  const named = /([0-9a-f]{64})(?:\.json)?$/.exec(Config)?.[1];
  if (named !== undefined && `sha256:${named}` !== configDigest) throw digestMismatch(`sha256:${named}`);
  const config = parseAs(ConfigSchema, parseJson(configBytes), 'config');
  const diffIds = config.rootfs?.diff_ids ?? [];
  if (diffIds.length !== Layers.length) throw refused('image_bad_document', "The archive's config does not list its layers.");
  const want = hostPlatform();
  if ((config.os ?? 'linux') !== want.os || (config.architecture ?? want.architecture) !== want.architecture) {
    throw refused(
      'image_platform_unknown',
      `The image is for ${config.os ?? '?'}/${config.architecture ?? '?'}, not this machine's platform (${want.os}/${want.architecture}).`,
    );
  }
  // A saved layer is an uncompressed tar; its digest is its diff_id (newer archives name it by it too).
  const layers = Layers.map((path, i) => ({ path, digest: checkDigestSyntax(diffIds[i]), diffId: diffIds[i]! }));
  return {
    format: 'docker-archive',
    info: { digest: configDigest, platform: `${want.os}/${want.architecture}`, config: runConfig(config), layers: diffIds },
    layers,
  };
}

/**
 * An image's Env (`NAME=value` strings) as variables: names that are identifiers and values
 * without NUL bytes (others dropped); HOME is the sandbox's own.
 */
export function imageEnvs(env: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of env) {
    const eq = item.indexOf('=');
    const name = eq === -1 ? item : item.slice(0, eq);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || name === 'HOME' || item.includes('\0')) continue;
    out[name] = eq === -1 ? '' : item.slice(eq + 1);
  }
  return out;
}
