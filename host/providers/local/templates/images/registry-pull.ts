// `template pull`: an image fetched from a registry by the OCI distribution protocol. The transport
// is skopeo (containers/image, Debian's `skopeo`): the registries' bearer-token challenge,
// credentials from ~/.docker/config.json, index resolution to a platform and digest checks are all
// its own, well kept and widely used; a client of ours would have to redo each. It copies into an
// OCI layout made for this pull, with the blobs in the store's shared blob directory
// (`images/blobs/<alg>/<hex>`): a blob already there is not fetched again, so a second image on the
// same base, or the same image again, fetches only what is new. The layout is then imported as
// any OCI layout is (image-import.ts), every blob checked against its digest once more.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ProviderError } from '../../../provider-error.js';
import { findExecutable } from '../../system/preflight.js';
import { newTmpName } from '../store-writer.js';
import { hostPlatform } from './image-manifest.js';

/** The shared blob store of pulled images, in the templates directory. */
export const IMAGE_BLOBS_DIR = join('images', 'blobs');

/** A parsed image reference, normalised as docker does (`python` is `docker.io/library/python:latest`). */
export interface ImageReference {
  registry: string;
  repository: string;
  tag?: string;
  digest?: string;
  /** `registry/repository:tag` or `registry/repository@digest`. */
  canonical: string;
  /** The registry is on this machine's loopback (plain HTTP allowed). */
  isLoopback: boolean;
}

/** Options of a pull. */
export interface PullOpts {
  nameField?: string;
  referenceField?: string;
  /** Credentials for the registry (else ~/.docker/config.json, else anonymous). */
  credentials?: { username: string; password: string };
  /** Plain HTTP (or unverified TLS) to a registry that is not on the loopback. */
  isInsecure?: boolean;
  /** Where skopeo's progress goes: a terminal's descriptor (bars drawn in place)… */
  progressFd?: number;
  /** …or each line it prints. */
  onOutput?: (line: string) => void;
  /** Interrupts the pull. */
  signal?: AbortSignal;
}

const COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const REPOSITORY = new RegExp(`^${COMPONENT}(?:/${COMPONENT})*$`);
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^sha256:[0-9a-f]{64}$/;
const HOST = /^(?:[a-zA-Z0-9.-]+|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?$/;

/** Parses `reference` (`python:3.12-slim`, `ghcr.io/o/i:tag`, `host:port/repo@sha256:…`); invalid_argument names `field`. */
export function parseImageReference(reference: string, field: string): ImageReference {
  const bad = () =>
    new ProviderError('invalid_argument', {
      code: 'bad_image_reference',
      detail: `${field} must be an image reference: [registry[:port]/]repository[:tag][@sha256:digest].`,
    });
  if (typeof reference !== 'string' || reference.length > 512) throw bad();
  let rest = reference;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at !== -1) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
    if (!DIGEST.test(digest)) throw bad();
  }
  const slash = rest.indexOf('/');
  const first = slash === -1 ? '' : rest.slice(0, slash);
  const hasRegistry = first !== '' && (first.includes('.') || first.includes(':') || first === 'localhost');
  let registry = hasRegistry ? first : 'docker.io';
  rest = hasRegistry ? rest.slice(slash + 1) : rest;
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon !== -1) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
    if (!TAG.test(tag)) throw bad();
  }
  if (registry === 'index.docker.io') registry = 'docker.io';
  const repository = registry === 'docker.io' && !rest.includes('/') ? `library/${rest}` : rest;
  if (!REPOSITORY.test(repository) || !HOST.test(registry)) throw bad();
  if (tag === undefined && digest === undefined) tag = 'latest';
  // containers/image takes a tag or a digest, not both: the digest is what is meant.
  const canonical = digest !== undefined ? `${registry}/${repository}@${digest}` : `${registry}/${repository}:${tag}`;
  const host = registry.replace(/:[0-9]+$/, '');
  const isLoopback = host === 'localhost' || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '[::1]';
  return {
    registry,
    repository,
    canonical,
    isLoopback,
    ...(tag !== undefined ? { tag } : {}),
    ...(digest !== undefined ? { digest } : {}),
  };
}

/** skopeo copy's argv for a pull of `ref` into the OCI layout `layout` with blobs in `blobsDir`. */
export function skopeoPullArgs(
  ref: ImageReference,
  layout: string,
  blobsDir: string,
  opts: { authFile?: string; isInsecure?: boolean; hasPolicy: boolean },
): string[] {
  const platform = hostPlatform();
  return [
    // Without a system policy (/etc/containers/policy.json) skopeo refuses to copy at all; signatures are not what we check.
    ...(opts.hasPolicy ? [] : ['--insecure-policy']),
    '--override-os',
    platform.os,
    '--override-arch',
    platform.architecture,
    'copy',
    ...(ref.isLoopback || opts.isInsecure ? ['--src-tls-verify=false'] : []),
    ...(opts.authFile !== undefined ? ['--src-authfile', opts.authFile] : []),
    '--dest-shared-blob-dir',
    blobsDir,
    `docker://${ref.canonical}`,
    `oci:${layout}:image`,
  ];
}

/** What skopeo's failure means, by its message (its text is never passed on as ours). */
export function mapSkopeoFailure(stderr: string, ref: ImageReference): ProviderError {
  const name = ref.canonical;
  const mismatch = /(?:digest did not match|does not match digest|digest mismatch)/i.test(stderr);
  if (mismatch) {
    const digest = /expected (sha256:[0-9a-f]{64})/i.exec(stderr)?.[1] ?? /(sha256:[0-9a-f]{64})/.exec(stderr)?.[1] ?? 'of a layer';
    return new ProviderError('invalid_argument', {
      code: 'blob_digest_mismatch',
      detail: `A blob of ${name} (${digest}) does not match its digest: the registry served damaged or tampered data. Nothing was kept.`,
    });
  }
  if (/no image found in (?:manifest list|image index)|choosing an image from manifest list/i.test(stderr)) {
    const p = hostPlatform();
    return new ProviderError('invalid_argument', {
      code: 'image_platform_unknown',
      detail: `The image ${name} has no variant for this machine's platform (${p.os}/${p.architecture}).`,
    });
  }
  if (/unauthorized|authentication required|invalid username\/password|denied|status 401|status 403/i.test(stderr)) {
    return new ProviderError('permission_denied', {
      code: 'registry_login_refused',
      detail: `The registry refused access to ${name}: check the credentials (~/.docker/config.json, or --username with --password-stdin).`,
    });
  }
  if (/manifest unknown|name unknown|not found|status 404/i.test(stderr)) {
    return new ProviderError('not_found', {
      code: 'image_not_found',
      detail: `No image ${name} in its registry: no such repository, tag or digest.`,
    });
  }
  if (/HTTP response to HTTPS client/i.test(stderr)) {
    return new ProviderError('unavailable', {
      code: 'registry_plain_http',
      detail: `The registry of ${name} speaks plain HTTP: allowed only on the loopback, or with --insecure.`,
    });
  }
  return new ProviderError('unavailable', {
    code: 'pull_failed',
    detail: `The image ${name} could not be fetched (skopeo failed; its last lines are above): is the registry reachable?`,
  });
}

/** An OCI layout a pull made, its blobs in the shared blob directory; `remove` drops the layout (never the blobs). */
export interface PulledLayout {
  layout: string;
  blobsDir: string;
  remove(): void;
}

/** A docker-style auth file naming `registry`'s credentials (private, removed with the layout). */
function writeAuthFile(path: string, registry: string, credentials: { username: string; password: string }): void {
  const auth = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
  writeFileSync(path, JSON.stringify({ auths: { [registry]: { auth } } }), { mode: 0o600 });
}

/** Fetches `ref` for this machine's platform into a new OCI layout in `templatesDir`'s images directory. */
export async function pullToLayout(ref: ImageReference, templatesDir: string, opts: PullOpts): Promise<PulledLayout> {
  const skopeo = findExecutable('skopeo');
  if (!skopeo) {
    throw new ProviderError('unavailable', {
      code: 'skopeo_missing',
      detail: 'template pull needs skopeo, which is not installed: apt-get install skopeo (import needs nothing more).',
    });
  }
  const blobsDir = join(templatesDir, IMAGE_BLOBS_DIR);
  mkdirSync(blobsDir, { recursive: true, mode: 0o700 });
  const work = join(templatesDir, 'images', newTmpName());
  mkdirSync(work, { mode: 0o700 });
  const remove = () => rmSync(work, { recursive: true, force: true });
  try {
    const layout = join(work, 'layout');
    let authFile: string | undefined;
    if (opts.credentials) {
      authFile = join(work, 'auth.json');
      writeAuthFile(authFile, ref.registry, opts.credentials);
    }
    const args = skopeoPullArgs(ref, layout, blobsDir, {
      isInsecure: opts.isInsecure === true,
      hasPolicy: existsSync('/etc/containers/policy.json'),
      ...(authFile !== undefined ? { authFile } : {}),
    });
    const { status, stderr } = await runSkopeo(skopeo, args, opts);
    if (status !== 0) {
      for (const line of stderr.trim().split('\n').slice(-5)) if (line) opts.onOutput?.(line);
      if (opts.signal?.aborted)
        throw new ProviderError('conflict', { code: 'pull_interrupted', detail: 'The pull was interrupted; nothing was kept.' });
      throw mapSkopeoFailure(stderr, ref);
    }
    return { layout, blobsDir, remove };
  } catch (e) {
    remove();
    throw e;
  }
}

function runSkopeo(skopeo: string, args: string[], opts: PullOpts): Promise<{ status: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(skopeo, args, {
      stdio: ['ignore', opts.progressFd ?? 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    const onAbort = () => child.kill('SIGTERM');
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    if (child.stdout) createInterface({ input: child.stdout }).on('line', (l) => opts.onOutput?.(l));
    let stderr = '';
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => (stderr = (stderr + d).slice(-8192)));
    child.once('error', reject);
    child.once('close', (code) => {
      opts.signal?.removeEventListener('abort', onAbort);
      resolve({ status: code ?? 128, stderr });
    });
  });
}
