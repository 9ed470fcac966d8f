// The in-sandbox agent (dist/agent.cjs) runs inside a local sandbox and its selftest passes
// there: process groups, /proc, atomic rename, the log cap and masking, as the sandbox user.
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import type { Provider } from '../../host/providers/provider.js';
import { AGENT_BUNDLE, KEEPER_SCRIPT } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';

describe('the agent inside a local sandbox', () => {
  const stateDir = tempStateDir();
  let provider: Provider;
  let id: string;

  beforeAll(async () => {
    requireSandboxes();
    provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT });
    id = (await provider.create({ timeoutS: 120 })).sandbox_id;
  });

  afterAll(async () => {
    await provider.kill(id).catch(() => {});
    await provider.close();
    await destroyStateDir(stateDir);
  });

  it('passes its selftest', async () => {
    expect(existsSync(AGENT_BUNDLE)).toBe(true);
    const bundle = readFileSync(AGENT_BUNDLE);
    const path = '.cache/sandbox-mcp/agent.cjs';
    expect(await provider.writeFile(id, path, bundle)).toEqual({ size: bundle.length });
    const r = await provider.exec(id, `node ${path} selftest`, { timeoutS: 60 });
    const report = JSON.parse(r.stdout.toString()) as { ok: boolean; checks: { name: string; ok: boolean }[] };
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.ok).toBe(true);
    expect(r.exitCode).toBe(0);
  });
});
