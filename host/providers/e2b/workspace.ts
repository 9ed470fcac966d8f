// An e2b sandbox's workspace: the host directory copied in at create (E2B's sandboxes are remote,
// so nothing can be shared), twice — the working copy at ~/workspace and, beside it, the tree it
// started from, which the agent compares it with. The copy is a tar made on the host, capped, then
// unpacked inside (modes and mtimes kept, so an untouched file's size, mtime and mode still match
// its base). The host path and origin live in the sandbox's E2B metadata, which only the API key's
// holder can write: nothing inside can change where `apply` writes.
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import type { Sandbox } from 'e2b';
import { ProviderError } from '../provider-error.js';
import { SANDBOX_HOME, type SandboxWorkspace, type WorkspaceOrigin } from '../provider.js';
import { captureOrigin } from '../workspace-origin.js';
import { runHelperScript } from './commands.js';

/** Where the sandbox sees its workspace (the default cwd of its commands). */
export const E2B_WORKSPACE_PATH = `${SANDBOX_HOME}/workspace`;

/** The copy the workspace is compared with, and the tar in transit: in the home, wherever envd puts it. */
const BASE_TREE = '~/.sandbox-mcp/workspace-base';
const TAR_IN_HOME = '.sandbox-mcp/workspace.tar';

/** The E2B metadata key holding the workspace's record (host path and origin); never disclosed. */
export const WORKSPACE_METADATA_KEY = 'sandbox-mcp-workspace';

/** The largest workspace copied in, as a tar's bytes: the copy travels at create and is stored twice. */
export const E2B_WORKSPACE_MAX_BYTES = 64 * 1024 * 1024;

/** A workspace packed for the trip: the tar and what the host directory was when it was read. */
export interface PackedWorkspace {
  hostPath: string;
  tar: Buffer;
  origin: WorkspaceOrigin;
}

function tooLarge(maxBytes: number): ProviderError {
  return new ProviderError('insufficient_resources', {
    code: 'workspace_too_large',
    detail:
      `field \`workspace\`: the directory holds more than ${maxBytes / (1024 * 1024)} MiB (as a tar), the most an e2b sandbox gets copied in at create. ` +
      'Name a smaller directory (a part of the project), or use the local provider, whose workspace is copy-on-write and has no such cap.',
  });
}

/** Runs `tar` over `hostPath` into memory, refusing past `maxBytes` (the tar is stopped there). */
function tarOf(hostPath: string, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const tar = spawn('tar', ['-C', hostPath, '--numeric-owner', '-cf', '-', '.'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const chunks: Buffer[] = [];
    let bytes = 0;
    let isTooLarge = false;
    tar.stdout.on('data', (b: Buffer) => {
      bytes += b.length;
      if (bytes > maxBytes) {
        isTooLarge = true;
        tar.kill('SIGKILL');
        return;
      }
      chunks.push(b);
    });
    tar.on('error', () =>
      reject(
        new ProviderError('unavailable', {
          code: 'tar_missing',
          detail: 'The server needs `tar` to copy a workspace into an e2b sandbox.',
        }),
      ),
    );
    tar.on('close', (code) => {
      if (isTooLarge) return reject(tooLarge(maxBytes));
      // 1: a file changed while it was read — it is in the copy as read; the origin's instant precedes it.
      if (code !== 0 && code !== 1)
        return reject(
          new ProviderError('permission_denied', {
            code: 'workspace_unreadable',
            detail: 'field `workspace`: the server could not read the whole directory.',
          }),
        );
      resolve(Buffer.concat(chunks));
    });
  });
}

/** Reads the host directory for a create: the origin first (so a change while it is read counts as after), then the tar. */
export async function packWorkspace(hostPath: string, maxBytes = E2B_WORKSPACE_MAX_BYTES): Promise<PackedWorkspace> {
  const origin = await captureOrigin(hostPath, tmpdir());
  return { hostPath, tar: await tarOf(hostPath, maxBytes), origin };
}

/** The metadata entry that records a packed workspace. */
export function workspaceMetadata(packed: PackedWorkspace): Record<string, string> {
  return { [WORKSPACE_METADATA_KEY]: JSON.stringify({ host_path: packed.hostPath, origin: packed.origin }) };
}

/** Unpacks the tar twice inside — the working copy and its base — then drops it. */
export async function unpackWorkspace(sandbox: Sandbox, packed: PackedWorkspace): Promise<void> {
  const tarPath = `${SANDBOX_HOME}/${TAR_IN_HOME}`;
  await sandbox.files.write(
    tarPath,
    packed.tar.buffer.slice(packed.tar.byteOffset, packed.tar.byteOffset + packed.tar.byteLength) as ArrayBuffer,
  );
  const base = BASE_TREE.replace('~/', '');
  await runHelperScript(
    sandbox,
    [
      'set -e',
      `mkdir -p "$HOME/workspace" "$HOME/${base}"`,
      // -p keeps the modes exactly; mtimes are kept by default.
      `tar -xpf "$HOME/${TAR_IN_HOME}" -C "$HOME/workspace"`,
      `tar -xpf "$HOME/${TAR_IN_HOME}" -C "$HOME/${base}"`,
      `rm -f "$HOME/${TAR_IN_HOME}"`,
    ].join('\n'),
    {},
  );
}

/** The workspace recorded in a sandbox's E2B metadata, or null when it has none (or the entry is not ours). */
export function workspaceFrom(metadata: Record<string, string> | undefined): SandboxWorkspace | null {
  const text = metadata?.[WORKSPACE_METADATA_KEY];
  if (text === undefined) return null;
  let record: { host_path?: unknown; origin?: WorkspaceOrigin };
  try {
    record = JSON.parse(text) as typeof record;
  } catch {
    return null;
  }
  if (typeof record.host_path !== 'string' || typeof record.origin?.sinceNs !== 'string') return null;
  return {
    hostPath: record.host_path,
    path: E2B_WORKSPACE_PATH,
    trees: { base: BASE_TREE, current: '~/workspace' },
    isBaseFrozen: true,
    origin: record.origin,
  };
}
