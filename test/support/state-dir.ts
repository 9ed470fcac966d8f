// A private state directory per test file for local sandboxes, and its complete removal.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';

/** A fresh private state directory (0700, this user's). */
export function tempStateDir(): string {
  return mkdtempSync(join(tmpdir(), 'sandbox-mcp-test-'));
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
