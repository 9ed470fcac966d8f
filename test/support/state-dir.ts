// A private state directory per test file for local sandboxes, and its complete removal.
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ResidentRecord } from '../../host/providers/local/keeper/resident.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { RESIDENT_FILE } from '../../host/providers/local/sandbox/state-dir.js';
import { scratchDir } from './scratch.js';

/** A fresh private state directory (0700, this user's); removed when the test file ends, if destroyStateDir did not. */
export function tempStateDir(): string {
  return scratchDir('sandbox-mcp-test-');
}

/** Destroys every local sandbox left in the state directory, then removes the directory. */
export async function destroyStateDir(stateDir: string): Promise<void> {
  const provider = createLocalProvider({ stateDir });
  try {
    for (const sb of await provider.list({ limit: 1000, offset: 0 })) await provider.kill(sb.sandbox_id).catch(() => undefined);
  } catch {
    // A directory a test made unusable on purpose (another owner, open permissions) lists nothing.
  } finally {
    await provider.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

/** The resident.json a local sandbox's keeper wrote in `stateDir` (by MCP or provider id); null before it wrote one. */
export function residentRecordOf(stateDir: string, sandboxId: string): ResidentRecord | null {
  try {
    return JSON.parse(readFileSync(join(stateDir, 'local', sandboxId.replace(/^local:/, ''), RESIDENT_FILE), 'utf8')) as ResidentRecord;
  } catch {
    return null;
  }
}
