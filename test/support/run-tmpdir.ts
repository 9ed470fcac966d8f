// vitest's global setup: one temporary folder for the whole run, removed when it ends. Tests make
// scratch trees with mkdtemp(tmpdir()) — image layouts, mini roots, template stores, registries —
// and not every one removes its own (a failed test never does); without this each run left some
// thousands of them in the machine's /tmp. Workers are forked after this runs, so TMPDIR reaches
// them, and through them the servers and CLIs they start with the test's environment.
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'sandbox-mcp-tests-'));
  // As /tmp is: a server a test runs as another user (nobody) makes its own temporary files here.
  chmodSync(root, 0o1777);
  process.env.TMPDIR = root;
  return () => {
    try {
      rmSync(root, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      // A mount a test left behind, say: the rest is gone, and the run's result is not this.
      process.stderr.write(`could not remove the run's temporary folder ${root}: ${(err as Error).message}\n`);
    }
  };
}
