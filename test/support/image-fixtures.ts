// Container images for tests, made here: layers packed with GNU tar from small directories (a mini
// root, a whiteout, an opaque directory), written as an OCI image layout (blobs by digest, a
// manifest per platform, an index), pushed to a real registry with skopeo, or saved as docker
// save writes them. And the registry: Debian's docker-registry (the CNCF distribution server)
// on a free loopback port, with optional token auth served by a tiny issuer of ours.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createHash, generateKeyPairSync, createSign } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { removeAtEnd, scratchDir } from './scratch.js';

/** sha256:<hex> of bytes. */
export function digestOf(bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

/**
 * A directory packed as a layer tar (numeric owners), uncompressed. `omit`: directories left out
 * as members (their contents stay), so a member can reach under a link a lower layer made.
 */
export function packLayer(dir: string, omit: readonly string[] = []): Buffer {
  const members = execFileSync('find', ['.', '-mindepth', '1'], { cwd: dir, encoding: 'utf8' })
    .split('\n')
    .filter((m) => m !== '' && !omit.includes(m.slice(2)))
    .sort();
  return execFileSync('tar', ['-c', '-C', dir, '--numeric-owner', '--no-recursion', ...members], { maxBuffer: 1 << 30 });
}

/** One image of a layout: its layers (uncompressed tars, bottom first), its config and platform. */
export interface FixtureImage {
  layers: Buffer[];
  config?: { Env?: string[]; WorkingDir?: string; User?: string; Cmd?: string[] };
  architecture?: string;
  /** gzip the layers (as registries hold them); else plain tar. */
  isGzip?: boolean;
}

function writeBlob(layout: string, bytes: Buffer): { digest: string; size: number } {
  const digest = digestOf(bytes);
  writeFileSync(join(layout, 'blobs/sha256', digest.slice(7)), bytes);
  return { digest, size: bytes.length };
}

/** Writes one image's blobs into `layout`; returns its manifest's descriptor. */
function writeImage(layout: string, image: FixtureImage): { mediaType: string; digest: string; size: number; platform: object } {
  const architecture = image.architecture ?? (process.arch === 'x64' ? 'amd64' : process.arch);
  const layers = image.layers.map((tar) => {
    const bytes = image.isGzip === false ? tar : gzipSync(tar, { level: 1 });
    return {
      mediaType: image.isGzip === false ? 'application/vnd.oci.image.layer.v1.tar' : 'application/vnd.oci.image.layer.v1.tar+gzip',
      ...writeBlob(layout, bytes),
    };
  });
  const config = Buffer.from(
    JSON.stringify({
      architecture,
      os: 'linux',
      config: image.config ?? {},
      rootfs: { type: 'layers', diff_ids: image.layers.map(digestOf) },
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...writeBlob(layout, config) },
      layers,
    }),
  );
  return {
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    ...writeBlob(layout, manifest),
    platform: { os: 'linux', architecture },
  };
}

/** An OCI image layout directory holding `images`: one (a manifest) or several (an index of platforms, as `asIndex`). */
export function writeOciLayout(images: FixtureImage[], opts: { asIndex?: boolean } = {}): string {
  const layout = scratchDir('oci-layout-');
  mkdirSync(join(layout, 'blobs/sha256'), { recursive: true });
  writeFileSync(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  const manifests = images.map((i) => writeImage(layout, i));
  let top: object;
  if (opts.asIndex) {
    const index = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests }));
    top = { mediaType: 'application/vnd.oci.image.index.v1+json', ...writeBlob(layout, index) };
  } else top = manifests[0]!;
  writeFileSync(
    join(layout, 'index.json'),
    JSON.stringify({ schemaVersion: 2, manifests: [{ ...top, annotations: { 'org.opencontainers.image.ref.name': 'latest' } }] }),
  );
  return layout;
}

/** What docker save writes for one image (the classic layout: <id>/layer.tar, <config hex>.json, manifest.json), as a tar file. */
export function writeDockerArchive(image: FixtureImage): string {
  const dir = scratchDir('docker-save-');
  const config = Buffer.from(
    JSON.stringify({
      architecture: process.arch === 'x64' ? 'amd64' : process.arch,
      os: 'linux',
      config: image.config ?? {},
      rootfs: { type: 'layers', diff_ids: image.layers.map(digestOf) },
    }),
  );
  const configName = `${digestOf(config).slice(7)}.json`;
  writeFileSync(join(dir, configName), config);
  const layerPaths = image.layers.map((tar, i) => {
    const id = createHash('sha256').update(`layer${i}`).update(tar).digest('hex');
    mkdirSync(join(dir, id));
    writeFileSync(join(dir, id, 'layer.tar'), tar);
    return `${id}/layer.tar`;
  });
  writeFileSync(join(dir, 'manifest.json'), JSON.stringify([{ Config: configName, RepoTags: ['fixture:latest'], Layers: layerPaths }]));
  const archive = removeAtEnd(`${dir}.tar`);
  execFileSync('tar', ['-cf', archive, '-C', dir, '.']);
  return archive;
}

/** Packs a directory (an OCI layout) as a tar archive (removed when the test file ends). */
export function tarDirectory(dir: string): string {
  const archive = removeAtEnd(`${dir}.tar`);
  execFileSync('tar', ['-cf', archive, '-C', dir, '.']);
  return archive;
}

/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createNetServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Whether a registry answers at 127.0.0.1:`port` (the Distribution API's version header, with or without auth). */
async function isRegistryAt(port: number): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/v2/`, { signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    return res.headers.get('docker-distribution-api-version') === 'registry/2.0';
  } catch {
    return false;
  }
}

/** A registry on the loopback, and its storage (blobs can be tampered with there). */
export interface TestRegistry {
  host: string;
  storage: string;
  /** Token auth: the user and password the issuer accepts for repositories under `private/`. */
  login?: { username: string; password: string };
  /** Stops the registry (and its issuer). */
  stop(): Promise<void>;
  /** The registry's log so far. */
  log(): string;
}

function base64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/**
 * A token issuer as the distribution spec has it: GET /token?service&scope, with Basic credentials
 * or anonymous. Anonymous callers get pull on everything but `private/*`; the login gets all.
 */
async function startTokenIssuer(
  dir: string,
  login: { username: string; password: string },
): Promise<{ server: Server; realm: string; certPath: string }> {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPath = join(dir, 'issuer.key');
  writeFileSync(keyPath, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const certPath = join(dir, 'issuer.crt');
  execFileSync('openssl', ['req', '-new', '-x509', '-key', keyPath, '-out', certPath, '-days', '2', '-subj', '/CN=test-issuer'], {
    stdio: 'ignore',
  });
  const certDer = Buffer.from(readFileSync(certPath, 'utf8').replace(/-----[^-]+-----|\s/g, ''), 'base64');
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const auth = req.headers.authorization;
    let user: string | null = null;
    if (auth?.startsWith('Basic ')) {
      const [u, p] = Buffer.from(auth.slice(6), 'base64').toString().split(':');
      if (u !== login.username || p !== login.password) {
        res.writeHead(401).end('{"errors":[{"code":"UNAUTHORIZED","message":"invalid username/password"}]}');
        return;
      }
      user = u;
    }
    const access = url.searchParams.getAll('scope').flatMap((scope) => {
      const [type, name, actions] = scope.split(':');
      if (type !== 'repository' || !name) return [];
      if (name.startsWith('private/') && user === null) return [];
      return [{ type, name, actions: user !== null ? (actions ?? '').split(',') : ['pull'] }];
    });
    const now = Math.floor(Date.now() / 1000);
    const header = { alg: 'RS256', typ: 'JWT', x5c: [certDer.toString('base64')] };
    const claims = {
      iss: 'test-issuer',
      sub: user ?? '',
      aud: 'test-registry',
      exp: now + 600,
      nbf: now - 10,
      iat: now,
      jti: String(Math.random()),
      access,
    };
    const signing = `${base64url(JSON.stringify(header))}.${base64url(JSON.stringify(claims))}`;
    const signature = createSign('RSA-SHA256').update(signing).sign(privateKey);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ token: `${signing}.${base64url(signature)}` }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, realm: `http://127.0.0.1:${(server.address() as { port: number }).port}/token`, certPath };
}

/**
 * Starts docker-registry on a free loopback port; with `tokenAuth`, behind a token issuer of ours.
 * The port is free when asked for and taken by the registry a moment later: a process of the other
 * test worker may bind it in between (its servers listen on ports the kernel picks), so a registry
 * that could not bind is started again on another, and the port counts as the registry's only once
 * what answers there is a registry (its API version header), never another test's server.
 */
export async function startRegistry(opts: { tokenAuth?: boolean } = {}): Promise<TestRegistry> {
  const dir = scratchDir('registry-');
  const storage = join(dir, 'storage');
  const login = { username: 'tester', password: 'correct horse' };
  const issuer = opts.tokenAuth ? await startTokenIssuer(dir, login) : undefined;
  const auth = issuer
    ? `auth:\n  token:\n    realm: ${issuer.realm}\n    service: test-registry\n    issuer: test-issuer\n    rootcertbundle: ${issuer.certPath}\n`
    : '';
  let log = '';
  let child: ChildProcess;
  let port: number;
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    writeFileSync(
      join(dir, 'config.yml'),
      `version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: ${storage}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n${auth}`,
    );
    child = spawn('docker-registry', ['serve', join(dir, 'config.yml')], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    const exited = new Promise<void>((r) => child.once('close', () => r()));
    let isServing = false;
    for (let i = 0; i <= 100 && child.exitCode === null && !isServing; i++) {
      isServing = await isRegistryAt(port);
      if (!isServing) await new Promise((r) => setTimeout(r, 50));
    }
    if (isServing && child.exitCode === null) break;
    child.kill('SIGKILL');
    await exited;
    if (attempt === 3 || !/address already in use/.test(log)) throw new Error(`docker-registry did not start: ${log.slice(-2000)}`);
    log = '';
  }
  const host = `127.0.0.1:${port}`;
  return {
    host,
    storage,
    ...(issuer ? { login } : {}),
    log: () => log,
    async stop() {
      child.kill('SIGTERM');
      issuer?.server.close();
      await new Promise((r) => child.once('close', r));
    },
  };
}

/** Pushes an OCI layout to `registry` as `repo:tag` with skopeo (every platform of an index); async, as a token issuer runs in this process. */
export function pushLayout(layout: string, registry: TestRegistry, repoTag: string): Promise<void> {
  const creds = registry.login ? ['--dest-creds', `${registry.login.username}:${registry.login.password}`] : [];
  const args = [
    '--insecure-policy',
    'copy',
    '--all',
    '--dest-tls-verify=false',
    ...creds,
    `oci:${layout}:latest`,
    `docker://${registry.host}/${repoTag}`,
  ];
  return new Promise((resolve, reject) =>
    execFile('skopeo', args, (error, _stdout, stderr) => (error ? reject(new Error(`skopeo push failed: ${stderr}`)) : resolve())),
  );
}
