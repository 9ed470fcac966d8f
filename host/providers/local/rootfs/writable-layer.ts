// A running template sandbox's writable layer, as the host reaches it: what a snapshot copies.
// The layer (the overlay's upper directory) lives on the sandbox's tmpfs at `<sandbox dir>/rw`,
// mounted in the private mount namespace its launch helper made (helpers/mount-root.pl), whose last
// host-side member is bwrap's outer process: so it is `/proc/<bwrap pid>/root/<sandbox dir>/rw/upper`
// from the host, readable by the server's uid (root, or the non-root server's own uid) while the
// sandbox runs. It holds the sandbox's changes to its template and its /home/user, /tmp and /var/tmp;
// also `.sandbox-mcp/` (the agent runtime's mount point: not the sandbox's), and the agent's
// installs and task directories under /home/user/.sandbox-mcp and /home/user/.local/state/sandbox-agent.
// A sandbox with a workspace has its overlay's merged view at `<sandbox dir>/rw/ws/merged` in the same
// namespace: what it sees at /workspace, which a snapshot copies too.
// Whiteouts are 0/0 character devices, opaque directories carry `trusted.overlay.opaque` (root
// server) or `user.overlay.opaque` (userxattr: a server that is not root).
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readKeeperRecord, readSpec } from '../sandbox/state-dir.js';
import { isAlive } from '../system/proc.js';

/** The directory of a sandbox's writable root on the host (see the module comment); empty from the host's view. */
export const WRITABLE_ROOT_DIR = 'rw';

/** Where, on that tmpfs, the launch helper mounts a workspace's overlay (helpers/mount-root.pl's ws/merged). */
export const WORKSPACE_MERGED_DIR = 'ws/merged';

/** A template sandbox's writable layer while it runs. */
export interface LiveWritableLayer {
  /** Host path of the overlay's upper directory (valid while the sandbox runs). */
  upperDir: string;
  /**
   * What to subtract from the owners of its files to get the template's own: a root server maps
   * the sandbox's ids 0-65535 onto host ids from here (layers are stored with native owners); 0
   * for a server that is not root (layers are stored owned by its uid, as the upper's files are).
   */
  ownerShift: number;
  /**
   * Freezes the sandbox's commands and tasks (their cgroup v2 `cgroup.freeze`) for a consistent
   * copy and resolves with the function that thaws them; resolves null where nothing can freeze
   * them (cgroup v1, whose sandboxes have no freezer cgroup): a copy is then what a crash would leave.
   */
  freeze(timeoutMs?: number): Promise<(() => void) | null>;
  /** Host path of its workspace's merged view (valid while the sandbox runs); absent without a workspace. */
  workspaceDir?: string;
}

/**
 * The writable layer of the running template sandbox in `sandboxDir` (a directory of the local
 * provider's state); null for a base sandbox (its system is the host's) or one that is not running.
 */
export function liveWritableLayer(sandboxDir: string): LiveWritableLayer | null {
  const spec = readSpec(sandboxDir);
  const keeper = readKeeperRecord(sandboxDir);
  if (!spec?.root || !keeper || !isAlive(keeper.bwrap) || !isAlive(keeper.pid1)) return null;
  const upperDir = join(`/proc/${keeper.bwrap.pid}/root`, sandboxDir, WRITABLE_ROOT_DIR, 'upper');
  if (!existsSync(upperDir)) return null;
  const workspaceDir = join(`/proc/${keeper.bwrap.pid}/root`, sandboxDir, WRITABLE_ROOT_DIR, WORKSPACE_MERGED_DIR);
  if (spec.workspace && !existsSync(workspaceDir)) return null;
  const freezeFiles = keeper.cgroups.map((dir) => join(dir, 'cgroup.freeze')).filter((f) => existsSync(f));
  return {
    upperDir,
    ownerShift: spec.root.mode === 'idrange' ? spec.identity.uid : 0,
    freeze: (timeoutMs = 2_000) => freezeCgroups(freezeFiles, timeoutMs),
    ...(spec.workspace ? { workspaceDir } : {}),
  };
}

async function freezeCgroups(files: readonly string[], timeoutMs: number): Promise<(() => void) | null> {
  if (files.length === 0) return null;
  const thaw = (): void => {
    for (const f of files) {
      try {
        writeFileSync(f, '0');
      } catch {
        // The sandbox ended meanwhile.
      }
    }
  };
  try {
    for (const f of files) writeFileSync(f, '1');
    // Freezing is asynchronous: cgroup.events says `frozen 1` once every task is stopped.
    const deadline = Date.now() + timeoutMs;
    const isFrozen = () => files.every((f) => /^frozen 1$/m.test(readFileSync(join(f, '..', 'cgroup.events'), 'utf8')));
    while (!isFrozen()) {
      if (Date.now() > deadline) throw new Error('not frozen in time');
      await new Promise((r) => setTimeout(r, 5));
    }
  } catch {
    thaw();
    return null;
  }
  return thaw;
}
