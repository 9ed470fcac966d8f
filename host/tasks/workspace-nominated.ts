// An e2b sandbox's workspace changes, on the host: its agent compares its two copies (the host
// cannot reach them), but its answer only nominates paths. The host downloads each nominated file
// itself (the provider's readFile), reads its own directory for the other side, and computes the
// changes and the patch from those bytes — what `diff` shows is what `apply` writes. What a path
// holds in the sandbox (a file's mode, a symlink's target) is the sandbox's content, as its bytes are.
import type { AgentClient } from './agent-client.js';
import { PROTOCOL_VERSION, WORKSPACE_LIMITS } from '../../shared/protocol.js';
import type { WorkspaceChange } from '../../shared/workspace/changes.js';
import type { TreeEntry, TreeFile, TreeReader } from '../../shared/workspace/tree-reader.js';
import { EXCLUDED_NAMES } from '../../shared/workspace/contract.js';
import type { Provider, SandboxWorkspace } from '../providers/provider.js';
import { entryNames } from '../util/beneath.js';

/** What the host downloaded of one nominated path. */
interface Downloaded {
  entry: TreeEntry;
  data?: Buffer;
  linkTarget?: string;
}

// Read in pieces: a provider's read is bounded per call.
const READ_CHUNK_BYTES = 4 * 1024 * 1024;

/** The whole file at `path` in the sandbox. */
export async function readWhole(provider: Provider, sandboxId: string, path: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  let offset = 0;
  for (;;) {
    const { data, size } = await provider.readFile(sandboxId, path, { offset, length: READ_CHUNK_BYTES });
    parts.push(data);
    offset += data.length;
    if (offset >= size || data.length === 0) return Buffer.concat(parts);
  }
}

/** The paths the agent nominates (every change it lists, whatever it says of them) and whether it listed them all. */
async function nominate(
  provider: Provider,
  agent: AgentClient,
  sandboxId: string,
  workspace: SandboxWorkspace,
  timeoutS: number,
): Promise<{ changes: WorkspaceChange[]; isTruncated: boolean }> {
  const result = await agent.call(
    provider,
    sandboxId,
    {
      protocol: PROTOCOL_VERSION,
      op: 'workspace_changes',
      base: workspace.trees.base,
      current: workspace.trees.current,
      patch: false,
      max_entries: WORKSPACE_LIMITS.maxEntries,
      max_patch_bytes: 0,
    },
    { timeoutS, maxOutputBytes: 16 * 1024 * 1024 },
  );
  return { changes: result.changes, isTruncated: result.changes_truncated };
}

/** A plain relative path of names (no `.`, `..`, empty name or `.git`): anything else nominated is dropped. */
function isPlainPath(path: string): boolean {
  try {
    const names = entryNames(path);
    return names.length > 0 && !names.some((n) => EXCLUDED_NAMES.includes(n));
  } catch {
    return false;
  }
}

function parentOf(rel: string): string {
  const at = rel.lastIndexOf('/');
  return at < 0 ? '' : rel.slice(0, at);
}

/** A tree holding only what was downloaded (and the directories above it). */
function downloadedTree(entries: Map<string, Downloaded>): TreeReader {
  const children = new Map<string, string[]>();
  for (const rel of entries.keys()) {
    const parent = parentOf(rel);
    const list = children.get(parent) ?? [];
    list.push(rel.slice(parent === '' ? 0 : parent.length + 1));
    children.set(parent, list);
  }
  return {
    lstat: (rel) => entries.get(rel)?.entry ?? null,
    names: (rel) => children.get(rel) ?? [],
    readLink: (rel) => entries.get(rel)?.linkTarget ?? null,
    open(rel): TreeFile | null {
      const data = entries.get(rel)?.data;
      if (data === undefined) return null;
      let at = 0;
      return {
        read(buf, offset, length) {
          const n = data.copy(buf, offset, at, Math.min(data.length, at + length));
          at += n;
          return n;
        },
        close() {},
      };
    },
  };
}

/** The sandbox's side of the nominated paths, downloaded by the host; see the module comment. */
export async function downloadNominated(
  provider: Provider,
  agent: AgentClient,
  sandboxId: string,
  workspace: SandboxWorkspace,
  timeoutS: number,
): Promise<{ current: TreeReader; paths: string[]; isTruncated: boolean; addedPaths: Set<string> }> {
  const nominated = await nominate(provider, agent, sandboxId, workspace, timeoutS);
  const changes = nominated.changes.filter((c) => isPlainPath(c.path));
  const isTruncated = nominated.isTruncated;
  const entries = new Map<string, Downloaded>();
  for (const c of changes) {
    if (c.change === 'deleted' || entries.has(c.path)) continue;
    const mode = parseInt(c.mode_after ?? '0644', 8) & 0o7777;
    const entry: TreeEntry = { kind: c.kind, mode, size: 0, mtimeMs: 0, isWhiteout: false };
    if (c.kind === 'file') {
      const data = await readWhole(provider, sandboxId, `${workspace.path}/${c.path}`);
      entries.set(c.path, { entry: { ...entry, size: data.length }, data });
    } else if (c.kind === 'symlink') {
      if (c.link_target === null) continue;
      entries.set(c.path, { entry: { ...entry, size: Buffer.byteLength(c.link_target) }, linkTarget: c.link_target });
    } else entries.set(c.path, { entry });
  }
  // Which paths were absent from the copy at create: the agent's word, used only for host_changed
  // of a path the host lacks now (did the person delete it since?), as before.
  const addedPaths = new Set(changes.filter((c) => c.change === 'added').map((c) => c.path));
  return { current: downloadedTree(entries), paths: changes.map((c) => c.path), isTruncated, addedPaths };
}
