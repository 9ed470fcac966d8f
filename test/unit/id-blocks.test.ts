// Blocks of host ids for template sandboxes (rootfs/id-blocks.ts): claimed exclusively, given back
// only by their holder, a stale one (its sandbox directory gone) taken over only when none is free.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { claimIdBlock, ID_BLOCK_BASE, ID_BLOCK_COUNT, ID_BLOCK_SIZE, releaseIdBlock } from '../../host/providers/local/rootfs/id-blocks.js';
import { SANDBOX_UID_BASE, SANDBOX_UID_COUNT } from '../../host/providers/local/sandbox/ids.js';

describe('id blocks', () => {
  const root = mkdtempSync(join(tmpdir(), 'id-blocks-'));
  const live = join(root, 'live');
  mkdirSync(live);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('lie above the base sandboxes’ uids and below 2^31, 65536 ids each', () => {
    expect(ID_BLOCK_BASE).toBeGreaterThanOrEqual(SANDBOX_UID_BASE + SANDBOX_UID_COUNT);
    expect(ID_BLOCK_BASE + ID_BLOCK_COUNT * ID_BLOCK_SIZE).toBeLessThanOrEqual(0x7ffe_0000);
    expect(ID_BLOCK_COUNT).toBeGreaterThan(1000);
  });

  it('gives each claim a block of its own, and back only to the sandbox that holds it', () => {
    const claims = join(root, 'a');
    const first = claimIdBlock(join(live, 'one'), claims);
    const second = claimIdBlock(join(live, 'two'), claims);
    expect(first).not.toBe(second);
    for (const b of [first, second]) expect((b - ID_BLOCK_BASE) % ID_BLOCK_SIZE).toBe(0);
    releaseIdBlock(first, join(live, 'two'), claims);
    expect(readdirSync(claims)).toHaveLength(2);
    releaseIdBlock(first, join(live, 'one'), claims);
    expect(readdirSync(claims).map((k) => readFileSync(join(claims, k), 'utf8'))).toEqual([join(live, 'two')]);
  });

  it('takes over a claim whose sandbox directory is gone only when every block is claimed; none left is ENOSPC', () => {
    // Eight blocks stand for all of them.
    const count = 8;
    const claims = join(root, 'full');
    mkdirSync(claims, { mode: 0o700 });
    for (let k = 0; k < count; k++) writeFileSync(join(claims, String(k)), k === 5 ? join(root, 'gone') : live);
    mkdirSync(join(live, 'new'));
    expect(claimIdBlock(join(live, 'new'), claims, count)).toBe(ID_BLOCK_BASE + 5 * ID_BLOCK_SIZE);
    expect(readFileSync(join(claims, '5'), 'utf8')).toBe(join(live, 'new'));
    expect(() => claimIdBlock(join(live, 'newer'), claims, count)).toThrow(expect.objectContaining({ code: 'ENOSPC' }));
    expect(readdirSync(claims)).toHaveLength(count);
  });
});
