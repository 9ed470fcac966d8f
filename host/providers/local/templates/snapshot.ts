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
// The copy never follows the sandbox's symlinks (layer-copy.ts): a directory swapped for a link to a
// host path while it runs makes the snapshot refuse (snapshot_changed_while_copying), never read the host.
// Snapshot storage (the layers snapshots added) is capped: a snapshot that would pass the cap is
// refused before anything is copied, and stopped while copying should its files grow past it meanwhile.
import { chmodSync, fstatSync, lchownSync, mkdirSync, utimesSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { BeneathDir } from '../../../util/beneath.js';
import { ProviderError } from '../../provider-error.js';
import { CopyMeta, type CopyMetaHelper } from './copy-meta.js';
import { bytesBeneath, copyBeneath, type CopyRule, type CopyRules, type LayerCopy } from './layer-copy.js';
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

/**
 * Most layers a template may stack: an image of more is refused, and so is a snapshot of a template
 * with as many. Docker's own bound (overlay2's 128); the sandbox's overlay names each layer by a
 * short relative path (mount-root.pl's l<i>), so the mount's options stay well within their page.
 */
export const MAX_TEMPLATE_LAYERS = 128;

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

/** The rules; `hasWorkspace`: the upper's /workspace is a mount point, its files come from the workspace. */
function rulesTree(hasWorkspace: boolean, rules: SnapshotRules): CopyRules {
  const root: CopyRules = { children: new Map() };
  const add = (path: string, rule: CopyRule) => {
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

/** Opens the root of a tree the sandbox controls, never leaving its file system; a ProviderError when it is gone. */
function openTree(hostPath: string): BeneathDir {
  try {
    return BeneathDir.openRoot(hostPath, { sameDevice: true });
  } catch {
    throw new ProviderError('conflict', {
      code: 'snapshot_sandbox_gone',
      detail: 'The sandbox stopped while its snapshot was taken; nothing was kept.',
    });
  }
}

/** Copies the tree the sandbox controls at `hostPath` into `to` (layer-copy.ts); resolves its top's status. */
async function copyTree(hostPath: string, to: string, rules: CopyRules | undefined, copy: LayerCopy, shownAt: string): Promise<Stats> {
  // Held open until the copy is done.
  return openTree(hostPath).useAsync(async (dir) => {
    await copyBeneath(dir, to, rules, copy, shownAt);
    return fstatSync(dir.fd);
  });
}

/**
 * Bytes the snapshot of `layer` would take: everything in its upper but what it leaves out and the
 * contents of the directories it empties, and its workspace's files. Walked without following a link.
 */
export function snapshotSizeBytes(
  layer: Pick<WritableLayerView, 'upperDir' | 'workspaceDir'>,
  rules: SnapshotRules = { keepAptCache: false },
): number {
  const { upperDir, workspaceDir } = layer;
  const seen = new Set<string>();
  let total = openTree(upperDir).use((dir) => bytesBeneath(dir, rulesTree(workspaceDir !== undefined, rules), seen));
  if (workspaceDir !== undefined) total += openTree(workspaceDir).use((dir) => bytesBeneath(dir, undefined, seen));
  return total;
}

/** What the copy needs beyond the layer: the helper for attributes and special files, the bytes it may take. */
export interface SnapshotCopyOpts {
  helper: CopyMetaHelper;
  budget: LayerCopy['budget'];
  rules: SnapshotRules;
}

/**
 * Fills `root` (which does not exist yet) with the snapshot of `layer`, the sandbox's processes
 * paused where they can be: its upper as the rules say, then its workspace's merged view as plain
 * files at /workspace (layer-copy.ts: never following the sandbox's links, charged as copied).
 * Resolves whether the processes were paused.
 */
export async function fillFromWritableLayer(
  root: string,
  layer: WritableLayerView,
  opts: SnapshotCopyOpts,
): Promise<{ isFrozen: boolean }> {
  mkdirSync(root, { mode: 0o755 });
  const meta = new CopyMeta(opts.helper);
  const copy = { ownerShift: layer.ownerShift, budget: opts.budget, meta };
  const thaw = await layer.freeze();
  try {
    await copyTree(layer.upperDir, root, rulesTree(layer.workspaceDir !== undefined, opts.rules), copy, '');
    if (layer.workspaceDir !== undefined) {
      const to = join(root, SNAPSHOT_WORKSPACE_DIR);
      mkdirSync(to, { mode: 0o700 });
      const top = await copyTree(layer.workspaceDir, to, undefined, copy, `/${SNAPSHOT_WORKSPACE_DIR}`);
      // Made like the sandbox's /workspace (owner shifted as its files are), once its files are in.
      const shift = (id: number) => (id >= layer.ownerShift && id < layer.ownerShift + 65_536 ? id - layer.ownerShift : id);
      if (process.geteuid?.() === 0) lchownSync(to, shift(top.uid), shift(top.gid));
      chmodSync(to, top.mode & 0o7777);
      utimesSync(to, top.atime, top.mtime);
    }
  } finally {
    thaw?.();
    meta.close();
  }
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

/** The refusal of a snapshot whose files grew past the cap while copied (snapshots held `used` before it). */
export function snapshotGrewPastCap(used: number, capBytes: number): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'snapshot_storage_full',
    detail:
      `Snapshot storage is full: this snapshot grew past the ${mib(Math.max(0, capBytes - used))} left of the ${mib(capBytes)} ` +
      'this server keeps (--max-snapshot-storage) while its files were copied; nothing was kept. Remove snapshots (sandbox-mcp template rm) or raise the cap.',
  });
}
