// A local sandbox's workspace, on the host's side: the person's directory becomes the lower of an
// overlay the launch helper mounts (helpers/mount-root.pl), its upper on the sandbox's tmpfs, so a
// create copies nothing whatever the directory's size, and nothing the sandbox writes reaches the
// host. Here: the checks and the spec entry at create, what the directory was at create (kept in
// the sandbox's state directory: providers/workspace-origin.ts), and the record getWorkspace gives.
import { lstatSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import type { SandboxWorkspace, WorkspaceOrigin } from '../../provider.js';
import { captureOrigin, recordNames } from '../../workspace-origin.js';
import { isWithin } from '../../workspace-policy.js';
import { WORKSPACE_BASE_VIEW, WORKSPACE_PATH, WORKSPACE_UPPER_VIEW } from '../launch/bwrap-args.js';
import type { SpecWorkspace } from '../sandbox/spec.js';
import { readKeeperRecord, WORKSPACE_NAMES_FILE, WORKSPACE_ORIGIN_FILE, writePrivateFile } from '../sandbox/state-dir.js';
import { isAlive } from '../system/proc.js';
import { WRITABLE_ROOT_DIR } from './writable-layer.js';

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * The spec entry of a workspace on `hostPath` (already checked against --workspace-allow): still a
 * directory, and neither holding nor inside one of the server's own directories (`privateDirs`:
 * its state, templates and cache), which no sandbox may see. `mountPoint`: where a root server's
 * helper shows its tmpfs to bwrap. Throws invalid_argument naming the field.
 */
export function specWorkspace(hostPath: string, privateDirs: readonly string[], mountPoint?: string): SpecWorkspace {
  let st;
  try {
    st = statSync(hostPath);
  } catch {
    st = null;
  }
  if (!st?.isDirectory()) {
    throw new ProviderError('invalid_argument', {
      code: 'workspace_not_found',
      detail: 'field `workspace` is no longer an existing directory.',
    });
  }
  const real = realOrSelf(hostPath);
  for (const dir of privateDirs.map(realOrSelf)) {
    if (isWithin(dir, real) || isWithin(real, dir)) {
      throw new ProviderError('invalid_argument', {
        code: 'workspace_holds_server_state',
        detail:
          "field `workspace` holds, or lies inside, one of this server's own directories (its state, templates or cache), which no sandbox may see: name another directory.",
      });
    }
  }
  return { hostPath: real, uid: st.uid, gid: st.gid, ...(mountPoint !== undefined ? { mountPoint } : {}) };
}

/**
 * Starts recording what the directory is now, in the sandbox's state directory `dir`: the instant
 * at once (before the overlay is mounted: a change after it counts as after create), the names of
 * its directories and its repository while the sandbox starts. Resolves once all is written.
 */
export function recordWorkspaceOrigin(dir: string, hostPath: string): { names(): void; done: Promise<void> } {
  const origin = captureOrigin(hostPath, dir);
  return {
    // Synchronous (a readdir walk): called while the keeper starts, it costs a create no wall time.
    names: () => writePrivateFile(join(dir, WORKSPACE_NAMES_FILE), JSON.stringify(recordNames(hostPath))),
    done: origin.then((o) => writePrivateFile(join(dir, WORKSPACE_ORIGIN_FILE), JSON.stringify(o) + '\n')),
  };
}

/** The workspace of the sandbox in state directory `dir` (spec entry `ws`), as the provider contract describes it. */
export function localWorkspace(dir: string, ws: SpecWorkspace): SandboxWorkspace {
  let origin: WorkspaceOrigin | undefined;
  try {
    origin = JSON.parse(readFileSync(join(dir, WORKSPACE_ORIGIN_FILE), 'utf8')) as WorkspaceOrigin;
  } catch {
    origin = undefined;
  }
  if (typeof origin?.sinceNs !== 'string') throw new ProviderError('internal', { code: 'workspace_record_unreadable' });
  return {
    hostPath: ws.hostPath,
    path: WORKSPACE_PATH,
    trees: { base: WORKSPACE_BASE_VIEW, current: WORKSPACE_PATH, upper: WORKSPACE_UPPER_VIEW },
    isBaseFrozen: false,
    origin,
    namesFile: join(dir, WORKSPACE_NAMES_FILE),
    hostTrees: liveWorkspaceTrees(dir),
  };
}

/**
 * The workspace overlay's upper and merged view of the running sandbox in state directory `dir`,
 * as the host reaches them: on the tmpfs the launch helper mounted at `<dir>/rw` in its private
 * mount namespace (helpers/mount-root.pl's ws/upper and ws/merged), whose last host-side member is
 * bwrap's outer process; null when the sandbox is not running.
 */
export function liveWorkspaceTrees(dir: string): { upper: string; current: string } | null {
  const keeper = readKeeperRecord(dir);
  if (!keeper || !isAlive(keeper.bwrap)) return null;
  const ws = join(`/proc/${keeper.bwrap.pid}/root`, dir, WRITABLE_ROOT_DIR, 'ws');
  return { upper: join(ws, 'upper'), current: join(ws, 'merged') };
}

/**
 * True when a layer of the template under a sandbox (`layerDirs`, their roots) holds something at
 * /workspace: a snapshot's plain /workspace would merge with it rather than replace it (hiding it
 * needs an opaque mark, an extended attribute node cannot set), so such a snapshot is refused.
 */
export function templateHoldsWorkspace(layerDirs: readonly string[]): boolean {
  return layerDirs.some((dir) => {
    const path = join(dir, WORKSPACE_PATH);
    try {
      return !lstatSync(path).isDirectory() || readdirSync(path).length > 0;
    } catch {
      return false;
    }
  });
}

/** The refusal of a snapshot of a workspace sandbox whose template already holds files at /workspace. */
export function workspaceSnapshotRefused(): ProviderError {
  return new ProviderError('unsupported', {
    code: 'workspace_snapshot',
    detail:
      "This sandbox has a workspace and its template already holds files at /workspace, which a local snapshot's copy of the workspace would merge with: the person applies the changes first (sandbox-mcp apply), or snapshot a sandbox made from a template without /workspace.",
  });
}
