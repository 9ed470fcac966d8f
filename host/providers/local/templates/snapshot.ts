// snapshot_sandbox on the local provider: a running template sandbox's writable layer (the
// overlay's upper directory, which holds its changes to the template and its /home/user, /tmp and
// /var/tmp) copied into a new layer, on top of the layers the sandbox runs on. The copy keeps
// whiteouts (a deleted file stays deleted) and opaque marks; it leaves out what is not the
// sandbox's own — the agent runtime's mount point, the agent's install and its task directories
// (tasks are not carried over) — the contents of /tmp and /var/tmp, and unless asked apt's
// downloaded package lists and archives. On a root server the
// sandbox's ids are a block of host ids: owners are shifted back to the template's own.
// A sandbox with a workspace: /workspace is its own overlay (the person's directory under an upper
// on the sandbox's tmpfs), not part of the writable layer. The snapshot copies that overlay's merged
// view — what the sandbox saw at /workspace — into the layer's `workspace` as plain files (the
// sandbox's deletions simply absent), so a sandbox created from it has them, and no workspace.
// Snapshot storage (the layers snapshots added) is capped: a snapshot that would pass the cap is
// refused before anything is copied, and again after, should the files have grown meanwhile.
import { chmodSync, lchownSync, lstatSync, mkdirSync, readdirSync, utimesSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { runProgram, treeSizeBytes } from './file-tree.js';
import { readLayer } from './store-writer.js';
import { listTemplates } from './store.js';

/** What the snapshot needs of the running sandbox's writable layer (rootfs/writable-layer.ts gives it). */
export interface WritableLayerView {
  /** Host path of the overlay's upper directory. */
  upperDir: string;
  /** What to subtract from its files' owners to get the template's own (0: none). */
  ownerShift: number;
  /** Pauses the sandbox's processes for the copy; resolves the thaw, or null where it cannot. */
  freeze(timeoutMs?: number): Promise<(() => void) | null>;
  /** Host path of its workspace's merged view (what it sees at /workspace); absent without one. */
  workspaceDir?: string;
}

/** Where, relative to the root, a snapshot puts the workspace's files (launch/bwrap-args.ts's WORKSPACE_PATH). */
export const SNAPSHOT_WORKSPACE_DIR = 'workspace';

/** Paths (relative to the root) a snapshot leaves out entirely: the server's, not the sandbox's. */
export const SNAPSHOT_LEFT_OUT = [
  // The agent runtime's mount point (bwrap made it in the writable layer).
  '.sandbox-mcp',
  // The agent the host installs (AGENT_INSTALL_DIR in the sandbox's home).
  'home/user/.sandbox-mcp',
  // The agent's task directories ($HOME/.local/state/sandbox-agent): tasks are not carried over.
  'home/user/.local/state/sandbox-agent',
] as const;

/** Directories a snapshot keeps, empty. */
export const SNAPSHOT_EMPTIED = ['tmp', 'var/tmp'] as const;

/**
 * apt's downloads, which a snapshot leaves out unless asked (`keep_apt_cache`): the package lists
 * `apt-get update` fetched (the directory kept, empty: apt makes its `partial` again) and the
 * archives' `.deb` files (the rest of the directory kept). A sandbox from it runs `apt-get update`
 * before installing, as on a fresh Debian image.
 */
export const SNAPSHOT_APT_LISTS = 'var/lib/apt/lists';
export const SNAPSHOT_APT_ARCHIVES = 'var/cache/apt/archives';

/** How a snapshot is taken: `keepAptCache` keeps apt's lists and archives. */
export interface SnapshotRules {
  keepAptCache: boolean;
}

/** Most layers a template may stack; a snapshot of a template with as many is refused. */
export const MAX_TEMPLATE_LAYERS = 32;

/** What a snapshot's note adds for a sandbox with a workspace. */
export const WORKSPACE_SNAPSHOT_NOTE =
  ' Its workspace is kept as plain files at /workspace, as the sandbox saw them (its edits, additions and deletions): ' +
  'a sandbox created from this template has no workspace of its own, so workspace_changes, sandbox-mcp diff and apply ' +
  'belong to the original sandbox, whose changes are still there to apply.';

/**
 * What snapshot_sandbox's result says about a local snapshot; `isFrozen`: its processes were paused
 * for the copy; `hasWorkspace`: the sandbox had a workspace, kept as files; `keptAptCache`: apt's
 * downloads were kept (keep_apt_cache).
 */
export function localSnapshotNote(isFrozen: boolean, hasWorkspace = false, keptAptCache = false): string {
  return (
    'Files only: processes and tasks are not carried over (a sandbox created from it starts with these files and nothing running), ' +
    (keptAptCache
      ? 'nor /tmp and /var/tmp. '
      : "nor /tmp and /var/tmp, nor apt's downloaded package lists and .deb archives (run apt-get update before installing; keep_apt_cache keeps them). ") +
    (isFrozen
      ? 'Its processes were paused while the files were copied, so they are as one moment left them.'
      : 'It was copied while its processes ran: a file being written at that moment may be caught half-written.') +
    (hasWorkspace ? WORKSPACE_SNAPSHOT_NOTE : '')
  );
}

/** leave: not copied; empty: the directory alone; no-debs: the directory without its `.deb` files. */
type Rule = 'leave' | 'empty' | 'no-debs';
interface PathNode {
  rule?: Rule;
  children: Map<string, PathNode>;
}

/** The rules; `hasWorkspace`: the upper's /workspace is a mount point, its files come from the workspace. */
function rulesTree(hasWorkspace: boolean, rules: SnapshotRules): PathNode {
  const root: PathNode = { children: new Map() };
  const add = (path: string, rule: Rule) => {
    let node = root;
    for (const part of path.split('/')) {
      let next = node.children.get(part);
      if (!next) node.children.set(part, (next = { children: new Map() }));
      node = next;
    }
    node.rule = rule;
  };
  for (const p of SNAPSHOT_LEFT_OUT) add(p, 'leave');
  for (const p of SNAPSHOT_EMPTIED) add(p, 'empty');
  if (hasWorkspace) add(SNAPSHOT_WORKSPACE_DIR, 'leave');
  if (!rules.keepAptCache) {
    add(SNAPSHOT_APT_LISTS, 'empty');
    add(SNAPSHOT_APT_ARCHIVES, 'no-debs');
  }
  return root;
}

function lstatOrNull(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}

/** A directory made with another's mode, owner and times (its extended attributes are not copied). */
function mkdirLike(path: string, st: Stats): void {
  mkdirSync(path);
  lchownSync(path, st.uid, st.gid);
  chmodSync(path, st.mode & 0o7777);
  utimesSync(path, st.atime, st.mtime);
}

/** Whether `name` in a `no-debs` directory is left out: a regular file ending in .deb. */
function isDeb(name: string, st: Stats): boolean {
  return st.isFile() && name.endsWith('.deb');
}

/**
 * Bytes the snapshot of `layer` would take: everything in its upper but what it leaves out and the
 * contents of the directories it empties, and its workspace's files.
 */
export function snapshotSizeBytes(
  layer: Pick<WritableLayerView, 'upperDir' | 'workspaceDir'>,
  rules: SnapshotRules = { keepAptCache: false },
): number {
  const { upperDir, workspaceDir } = layer;
  let total = treeSizeBytes(upperDir) + (workspaceDir !== undefined ? treeSizeBytes(workspaceDir) : 0);
  for (const p of SNAPSHOT_LEFT_OUT) {
    const st = lstatOrNull(join(upperDir, p));
    if (st?.isDirectory()) total -= st.size + treeSizeBytes(join(upperDir, p));
  }
  const emptied: string[] = [...SNAPSHOT_EMPTIED, ...(rules.keepAptCache ? [] : [SNAPSHOT_APT_LISTS])];
  for (const p of emptied) {
    if (lstatOrNull(join(upperDir, p))?.isDirectory()) total -= treeSizeBytes(join(upperDir, p));
  }
  if (!rules.keepAptCache && lstatOrNull(join(upperDir, SNAPSHOT_APT_ARCHIVES))?.isDirectory()) {
    for (const name of readdirSync(join(upperDir, SNAPSHOT_APT_ARCHIVES))) {
      const st = lstatSync(join(upperDir, SNAPSHOT_APT_ARCHIVES, name));
      if (isDeb(name, st)) total -= st.size;
    }
  }
  return Math.max(0, total);
}

/**
 * Copies `from` into the existing directory `to` but for the paths the rules name: entries under
 * no rule go to one `cp -a` per directory (whiteouts, xattrs, hard links kept); a directory on
 * the way to a rule's path is made alike and walked; a left-out path is skipped; an emptied one
 * is made alike, empty. An entry that is not a directory (a whiteout: the sandbox deleted it) is
 * copied as it is, whatever the rule.
 */
async function copyWithRules(from: string, to: string, node: PathNode): Promise<void> {
  const plain: string[] = [];
  for (const name of readdirSync(from)) {
    const child = node.children.get(name);
    const st = lstatSync(join(from, name));
    if (!child || !st.isDirectory()) {
      if (child?.rule !== 'leave') plain.push(name);
      continue;
    }
    if (child.rule === 'leave') continue;
    mkdirLike(join(to, name), st);
    if (child.rule === 'no-debs') await copyWithoutDebs(join(from, name), join(to, name));
    else if (child.rule !== 'empty') await copyWithRules(join(from, name), join(to, name), child);
  }
  if (plain.length === 0) return;
  const done = await runProgram('cp', ['-a', '--reflink=auto', '-t', to, '--', ...plain], { cwd: from });
  if (done.status !== 0) throw new ProviderError('internal', { code: 'snapshot_copy_failed' });
}

/** Copies the directory `from` into the existing `to` but for its `.deb` files (apt's archives). */
async function copyWithoutDebs(from: string, to: string): Promise<void> {
  const kept = readdirSync(from).filter((name) => !isDeb(name, lstatSync(join(from, name))));
  if (kept.length === 0) return;
  const done = await runProgram('cp', ['-a', '--reflink=auto', '-t', to, '--', ...kept], { cwd: from });
  if (done.status !== 0) throw new ProviderError('internal', { code: 'snapshot_copy_failed' });
}

/**
 * Copies the workspace's merged view `from` (its overlay: the person's files, the sandbox's writes
 * over them, its deletions absent) into `to` as plain files, `to` made like its top.
 */
async function copyWorkspace(from: string, to: string): Promise<void> {
  mkdirLike(to, lstatSync(from));
  const done = await runProgram('cp', ['-a', '--one-file-system', '--reflink=auto', '--', `${from}/.`, to]);
  if (done.status !== 0) throw new ProviderError('internal', { code: 'snapshot_copy_failed' });
}

/** Gives every file owned by an id of the sandbox's block the template's own id back (root servers). */
function shiftOwners(root: string, shift: number): void {
  const inBlock = (id: number) => id >= shift && id < shift + 65_536;
  const stack = [root];
  while (stack.length > 0) {
    const dir = stack.pop()!;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      const st = lstatSync(path);
      if (inBlock(st.uid) || inBlock(st.gid)) {
        lchownSync(path, inBlock(st.uid) ? st.uid - shift : st.uid, inBlock(st.gid) ? st.gid - shift : st.gid);
        // chown clears set-user-ID and set-group-ID: give them back.
        if (!st.isSymbolicLink() && (st.mode & 0o6000) !== 0) chmodSync(path, st.mode & 0o7777);
      }
      if (st.isDirectory()) stack.push(path);
    }
  }
}

/**
 * Fills `root` (which does not exist yet) with the snapshot of `layer`, the sandbox's processes
 * paused where they can be. Resolves whether they were.
 */
export async function fillFromWritableLayer(
  root: string,
  layer: WritableLayerView,
  rules: SnapshotRules = { keepAptCache: false },
): Promise<{ isFrozen: boolean }> {
  mkdirSync(root, { mode: 0o755 });
  const thaw = await layer.freeze();
  try {
    await copyWithRules(layer.upperDir, root, rulesTree(layer.workspaceDir !== undefined, rules));
    if (layer.workspaceDir !== undefined) await copyWorkspace(layer.workspaceDir, join(root, SNAPSHOT_WORKSPACE_DIR));
  } finally {
    thaw?.();
  }
  if (layer.ownerShift !== 0) shiftOwners(root, layer.ownerShift);
  return { isFrozen: thaw !== null };
}

/** Bytes of snapshot layers in the store: the top layer of every template a snapshot made, each once. */
export function snapshotStorageBytes(dir: string): number {
  const layers = new Set(listTemplates(dir).flatMap((t) => (t.source.kind === 'snapshot' ? [t.layers[0]!] : [])));
  let total = 0;
  for (const id of layers) total += readLayer(dir, id)?.size_bytes ?? 0;
  return total;
}

const MIB = 1024 * 1024;
const mib = (bytes: number) => `${(bytes / MIB).toFixed(1)} MiB`;

/** insufficient_resources unless `moreBytes` fit within the cap beside what snapshots hold already. */
export function assertSnapshotFits(dir: string, moreBytes: number, capBytes: number): void {
  const used = snapshotStorageBytes(dir);
  if (used + moreBytes <= capBytes) return;
  throw new ProviderError('insufficient_resources', {
    code: 'snapshot_storage_full',
    detail:
      `Snapshot storage is full: this snapshot needs ${mib(moreBytes)} and snapshots already hold ${mib(used)} of the ${mib(capBytes)} ` +
      'this server keeps (--max-snapshot-storage). Remove snapshots (sandbox-mcp template rm) or raise the cap; the sandbox is unchanged.',
  });
}
