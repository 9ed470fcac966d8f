// The `workspace_changes` op (protocol minor 4) through the built agent, as the host calls it: a
// copy in the home (`~/…`, as an e2b sandbox keeps it) compared with its base, the counts of every
// change beside the first `max_entries`, the patch only when asked and capped, and the refusals.
import { cpSync, mkdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkspaceChangesResultSchema } from '../../shared/protocol.js';
import { call, destroyWorld, newWorld, type AgentWorld } from '../support/agent-world.js';
import { requireBuild } from '../support/prerequisites.js';

let world: AgentWorld;
beforeAll(() => {
  requireBuild();
  world = newWorld();
  const base = join(world.home, 'base');
  mkdirSync(join(base, 'src'), { recursive: true });
  writeFileSync(join(base, 'src', 'app.js'), 'console.log(1);\n');
  writeFileSync(join(base, 'old.txt'), 'old\n');
  // The base's files are older than any edit, as in a workspace unpacked from the host's files: the
  // walk trusts equal size and mtime (as git's index does), and an edit of the same size written in
  // the same clock tick as its base file would read as unchanged (1 in a few runs on Node 22).
  const past = new Date(Date.now() - 3_600_000);
  for (const file of [join(base, 'src', 'app.js'), join(base, 'old.txt')]) utimesSync(file, past, past);
  cpSync(base, join(world.home, 'work'), { recursive: true, preserveTimestamps: true });
  writeFileSync(join(world.home, 'work', 'src', 'app.js'), 'console.log(2);\n');
  rmSync(join(world.home, 'work', 'old.txt'));
  for (let i = 0; i < 5; i++) writeFileSync(join(world.home, 'work', `new-${i}.txt`), `new ${i}\n`);
});
afterAll(() => destroyWorld(world));

async function changes(extra: Record<string, unknown> = {}) {
  const res = await call(world, { protocol: 1, op: 'workspace_changes', base: '~/base', current: '~/work', ...extra });
  if (!res.ok) throw new Error(`refused: ${res.error.code} ${res.error.message}`);
  return WorkspaceChangesResultSchema.parse(res.result);
}

describe('workspace_changes', () => {
  it('lists the changes of a copy in the home, without a patch unless asked', async () => {
    const r = await changes();
    expect(r.changes.map((c) => `${c.change} ${c.path}`)).toEqual([
      'added new-0.txt',
      'added new-1.txt',
      'added new-2.txt',
      'added new-3.txt',
      'added new-4.txt',
      'deleted old.txt',
      'modified src/app.js',
    ]);
    expect(r).toMatchObject({ changes_truncated: false, counts: { added: 5, modified: 1, deleted: 1, mode_changed: 0 }, patch: null });
    expect(r.changes.every((c) => c.diff === 'inline')).toBe(true);
  });

  it('lists the first max_entries by path, counts all, and says the patch misses the rest', async () => {
    const r = await changes({ max_entries: 2, patch: true });
    expect(r.changes.map((c) => c.path)).toEqual(['new-0.txt', 'new-1.txt']);
    expect(r.changes_truncated).toBe(true);
    expect(r.counts.added).toBe(5);
    expect(r.patch).toContain('+++ b/new-1.txt\n@@ -0,0 +1 @@\n+new 1\n');
    expect(r.patch).not.toContain('old.txt');
    expect(r.patch_truncated).toBe(true);
  });

  it('caps the patch at max_patch_bytes', async () => {
    const whole = await changes({ patch: true });
    expect(whole.patch_truncated).toBe(false);
    expect(whole.patch).toContain('-console.log(1);\n+console.log(2);\n');
    const cut = await changes({ patch: true, max_patch_bytes: 150 });
    expect(cut.patch_truncated).toBe(true);
    expect(Buffer.byteLength(cut.patch!)).toBeLessThanOrEqual(150);
    expect(whole.patch!.startsWith(cut.patch!)).toBe(true);
  });

  it('answers not_found for a tree that is not there, and refuses relative paths naming the field', async () => {
    const missing = await call(world, { protocol: 1, op: 'workspace_changes', base: '~/nope', current: '~/work' });
    expect(missing.ok ? null : missing.error.code).toBe('not_found');
    const relative = await call(world, { protocol: 1, op: 'workspace_changes', base: 'base', current: '~/work' });
    expect(relative.ok ? null : relative.error).toEqual({ code: 'invalid_request', message: 'field `base` is invalid' });
    const tooMany = await call(world, { protocol: 1, op: 'workspace_changes', base: '~/base', current: '~/work', max_entries: 10001 });
    expect(tooMany.ok ? null : tooMany.error.message).toContain('max_entries');
  });
});
