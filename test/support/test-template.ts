// Small templates for tests, written straight into a template store (templates/store.ts's format):
// a root made of a few of the host's programs, the libraries they link and a minimal /etc, with no
// node unless the host's programs include it. As root the files are the host's own, hard-linked
// (native owners; the layer is never written, sandboxes mount it read-only); a store for a server that
// is not root gets copies owned by that server's uid (flattened).
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  lchownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  realpathSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { elfInterpreter, linkedLibraries } from '../../host/providers/local/rootfs/agent-runtime.js';
import { layerRoot, type LayerOwners, type TemplateRecord } from '../../host/providers/local/templates/store.js';

/** What the test template holds besides its programs. */
export interface TestTemplateOpts {
  /** Host programs (absolute paths), placed at their path and their real path, with their libraries. */
  programs: readonly string[];
  /** Whole host directories placed as they are (e.g. python's standard library)… */
  trees?: readonly string[];
  /** …but for the entries whose names match (caches, static libraries a test never needs). */
  skipInTrees?: RegExp;
  /** native: a root server's; flattened: owned by `owner` (a server that is not root). */
  owners: LayerOwners;
  owner?: { uid: number; gid: number };
}

/** The host programs a shell-and-coreutils template needs for commands, files and the tests' checks. */
export const BASIC_PROGRAMS = [
  'bash', 'sh', 'ls', 'cat', 'id', 'head', 'tail', 'stat', 'mkdir', 'mv', 'rm', 'sleep', 'touch', 'dirname', 'df', 'wc', 'env',
  'find', 'unshare', 'mount', 'grep', 'tr', 'cut', 'printf', 'echo', 'true', 'false', 'readlink', 'ln', 'chmod', 'du', 'kill', 'ps',
  'dd', 'seq', 'sort', 'mkfifo',
].map(hostProgram); // prettier-ignore

/** A host program in the system directories (never a shell builtin or a shim elsewhere on PATH). */
export function hostProgram(name: string): string {
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin', '/bin']) {
    if (existsSync(join(dir, name))) return join(dir, name);
  }
  throw new Error(`the host has no ${name}`);
}

/** Writes template `name` into the store `dir` and returns its record. */
export function writeTestTemplate(dir: string, name: string, opts: TestTemplateOpts): TemplateRecord {
  const id = randomBytes(8).toString('hex');
  const root = layerRoot(dir, id);
  mkdirSync(root, { recursive: true, mode: 0o755 });
  const put = (hostPath: string): void => placeFile(root, hostPath, opts.owners);
  // A merged-/usr root, as Debian's.
  for (const d of ['usr/bin', 'usr/sbin', 'usr/lib', 'usr/lib64', 'etc', 'home', 'tmp', 'var/tmp', 'proc', 'dev', 'root']) {
    mkdirSync(join(root, d), { recursive: true, mode: 0o755 });
  }
  chmodSync(join(root, 'tmp'), 0o1777);
  chmodSync(join(root, 'var/tmp'), 0o1777);
  for (const [link, target] of [
    ['bin', 'usr/bin'],
    ['sbin', 'usr/sbin'],
    ['lib', 'usr/lib'],
    ['lib64', 'usr/lib64'],
  ])
    symlinkSync(target!, join(root, link!));
  const files = new Set<string>();
  for (const program of opts.programs) {
    // The name programs are called by (often a symlink: python3, sh) and the file itself.
    files.add(program).add(realpathSync(program));
    const loader = elfInterpreter(program);
    if (loader === null) continue;
    files.add(realpathSync(loader));
    // The library as the loader found it (often a symlink named by its soname) and the file itself.
    for (const lib of linkedLibraries(loader, program).values()) files.add(realpathSync(lib)).add(lib);
  }
  // Real files first, so that a symlink placed later points at something.
  for (const f of [...files].sort((a, b) => Number(lstatSync(a).isSymbolicLink()) - Number(lstatSync(b).isSymbolicLink()))) put(f);
  // The loader at the path programs name, and /bin/sh as the host has it.
  const loader = elfInterpreter(opts.programs[0]!);
  if (loader !== null && !existsSync(join(root, loader))) symlinkSync(realpathSync(loader), join(root, loader));
  if (!existsSync(join(root, 'usr/bin/sh'))) symlinkSync(realpathSync('/bin/sh'), join(root, 'usr/bin/sh'));
  for (const tree of opts.trees ?? []) copyTree(root, tree, opts.owners, opts.skipInTrees);
  writeFileSync(join(root, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n');
  writeFileSync(join(root, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
  if (opts.owners === 'flattened') chownTree(root, opts.owner ?? { uid: process.getuid!(), gid: process.getgid!() });
  const createdAt = new Date().toISOString();
  writeFileSync(
    join(dir, 'layers', id, 'layer.json'),
    JSON.stringify({ format: 1, id, created_at: createdAt, size_bytes: 0, owners: opts.owners }),
  );
  const record: TemplateRecord = {
    format: 1,
    name,
    source: { kind: 'import', from: 'test', format: 'directory' },
    created_at: createdAt,
    size_bytes: 0,
    layers: [id],
    owners: opts.owners,
  };
  writeFileSync(join(dir, `${name}.json`), JSON.stringify(record) + '\n');
  if (opts.owners === 'flattened') {
    const owner = opts.owner ?? { uid: process.getuid!(), gid: process.getgid!() };
    for (const p of [dir, join(dir, 'layers'), join(dir, 'layers', id), join(dir, 'layers', id, 'layer.json'), join(dir, `${name}.json`)]) {
      chownSync(p, owner.uid, owner.gid);
    }
  }
  return record;
}

/** Places one host file at the same path under `root`: a hard link (native owners) or a copy. */
function placeFile(root: string, hostPath: string, owners: LayerOwners): void {
  const to = join(root, hostPath);
  if (existsSync(to)) return;
  mkdirSync(dirname(to), { recursive: true, mode: 0o755 });
  if (owners === 'native') {
    try {
      linkSync(hostPath, to);
      return;
    } catch {
      // Another file system: copy.
    }
  }
  copyFileSync(hostPath, to);
}

/** Places a host directory tree at the same path under `root`, symlinks kept as they are. */
function copyTree(root: string, hostDir: string, owners: LayerOwners, skip?: RegExp): void {
  const visit = (rel: string): void => {
    if (skip && rel !== '' && skip.test(basename(rel))) return;
    const from = join(hostDir, rel);
    const to = join(root, hostDir, rel);
    const st = lstatSync(from);
    if (st.isDirectory()) {
      mkdirSync(to, { recursive: true, mode: st.mode & 0o7777 });
      for (const name of readdirSync(from)) visit(join(rel, name));
    } else if (st.isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else if (st.isFile()) placeFile(root, from, owners);
  };
  visit('');
}

function chownTree(path: string, owner: { uid: number; gid: number }): void {
  const st = lstatSync(path);
  if (st.isDirectory()) for (const name of readdirSync(path)) chownTree(join(path, name), owner);
  // lchown: a symlink itself, never what it points to; chown clears set-id bits, which are restored.
  lchownSync(path, owner.uid, owner.gid);
  if (!st.isSymbolicLink() && (st.mode & 0o6000) !== 0) chmodSync(path, st.mode & 0o7777);
}
