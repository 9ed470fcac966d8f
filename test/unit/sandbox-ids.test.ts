// Local sandbox ids, per-sandbox uids, the network a spec records, and where the state lives.
import { describe, expect, it } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { defaultStateDir } from '../../host/providers/local/sandbox/state-dir.js';
import { isSandboxId, newSandboxId, newSandboxUid, SANDBOX_UID_BASE, SANDBOX_UID_COUNT } from '../../host/providers/local/sandbox/ids.js';
import { specNetwork, type SandboxSpec } from '../../host/providers/local/sandbox/spec.js';

describe('ids and state paths', () => {
  it('gives per-sandbox uids from the unassigned range, never one already taken', () => {
    const taken = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const uid = newSandboxUid(taken);
      expect(taken.has(uid)).toBe(false);
      expect(uid).toBeGreaterThanOrEqual(SANDBOX_UID_BASE);
      expect(uid).toBeLessThan(Math.min(SANDBOX_UID_BASE + SANDBOX_UID_COUNT, 0x7ffe_0000));
      taken.add(uid);
    }
  });

  it('makes short, random, url-safe ids and rejects anything else', () => {
    const ids = new Set(Array.from({ length: 200 }, () => newSandboxId()));
    expect(ids.size).toBe(200);
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]{12}$/);
    for (const bad of ['', '../../etc/x', 'ABCDEFGHIJKL', 'abc', 'abcdefghijk/', '.gone-abcdefghijkl'])
      expect(isSandboxId(bad)).toBe(false);
  });

  it("reads the network a sandbox was made with: specs from before the option shared the host's", () => {
    const spec = { version: 1, id: 'abcdefghijkl' } as SandboxSpec;
    expect(specNetwork(spec)).toBe('host');
    expect(specNetwork({ ...spec, network: 'host' })).toBe('host');
    expect(specNetwork({ ...spec, network: 'isolated' })).toBe('isolated');
    // Anything else fails closed.
    expect(specNetwork({ ...spec, network: 'bogus' as never })).toBe('isolated');
    expect(() => createLocalProvider({ stateDir: '/nonexistent', network: 'bridge' as never })).toThrow(
      expect.objectContaining({ category: 'invalid_argument' }),
    );
  });

  it('resolves the state directory from the environment in order', () => {
    expect(defaultStateDir({ SANDBOX_MCP_STATE_DIR: '/s', XDG_STATE_HOME: '/x' })).toBe('/s');
    expect(defaultStateDir({ XDG_STATE_HOME: '/x' })).toBe('/x/sandbox-mcp');
    expect(defaultStateDir({ XDG_STATE_HOME: 'relative' })).toMatch(/\/\.local\/state\/sandbox-mcp$/);
  });
});
