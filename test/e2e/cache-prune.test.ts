// The cache's runtimes and base views nobody can still need are removed, and nothing else: servers
// as nobody (whose cache XDG_CACHE_HOME puts in this test's own directory, never the machine's
// /var/cache/sandbox-mcp), each on its own node binary (hard links of one copy: a runtime per
// server). A live sandbox of server A binds its runtime; B's sandbox ends; their runtimes and a
// base view are then made two days old, beside planted entries that must stay (a recent one, a
// symlink, a foreign name, another owner's); server C's first create prunes.
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  linkSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysOfLiveMounts } from '../../host/providers/local/rootfs/cache-prune.js';
import { connectStdio, ok, type StdioServer } from '../support/built-server.js';
import { isRootOrSkipping, requireCommands, requireSandboxes } from '../support/prerequisites.js';
import { waitFor } from '../support/wait.js';

const NOBODY = { uid: 65534, gid: 65534 };
const DAY_MS = 24 * 60 * 60_000;
// Starting a server as another user needs root.
const asRoot = isRootOrSkipping('the cache prune test (servers as nobody)');

describe.skipIf(!asRoot)('the cache keeps the runtimes and base views in use, and removes the rest', () => {
  let top = '';
  const servers: StdioServer[] = [];

  beforeAll(() => {
    requireSandboxes();
    requireCommands(['setpriv']);
    top = mkdtempSync(join(tmpdir(), 'sandbox-mcp-cache-prune-'));
    chmodSync(top, 0o755);
    for (const dir of ['state', 'xdg', 'nodes']) {
      mkdirSync(join(top, dir));
      chownSync(join(top, dir), NOBODY.uid, NOBODY.gid);
    }
    // One copy of node that nobody owns (so its runtimes can hard-link it), three names for it: three keys.
    for (const name of ['a', 'b', 'c']) mkdirSync(join(top, 'nodes', name), { mode: 0o755 });
    copyFileSync(process.execPath, join(top, 'nodes/a/node'));
    chownSync(join(top, 'nodes/a/node'), NOBODY.uid, NOBODY.gid);
    chmodSync(join(top, 'nodes/a/node'), 0o755);
    for (const name of ['b', 'c']) linkSync(join(top, 'nodes/a/node'), join(top, 'nodes', name, 'node'));
  });

  afterAll(async () => {
    for (const s of servers) {
      try {
        for (const sb of (await ok(s.client, 'list_sandboxes', {})).sandboxes as { sandbox_id: string }[])
          await s.client.callTool({ name: 'kill_sandbox', arguments: { sandbox_id: sb.sandbox_id } });
      } catch {
        // Closed by the test.
      }
      await s.close().catch(() => undefined);
    }
    if (top) rmSync(top, { recursive: true, force: true });
  });

  async function server(node: string): Promise<StdioServer> {
    const env = { SANDBOX_MCP_STATE_DIR: join(top, 'state'), XDG_CACHE_HOME: join(top, 'xdg'), SANDBOX_MCP_DEBUG: '1' };
    const s = await connectStdio(env, [], NOBODY, undefined, join(top, 'nodes', node, 'node'));
    servers.push(s);
    return s;
  }

  /** The host directories a sandbox's spec binds: its runtime and its base view's /etc. */
  function bindsOf(id: string): { runtime: string; etc: string } {
    const spec = JSON.parse(readFileSync(join(top, 'state/local', id.replace(/^local:/, ''), 'spec.json'), 'utf8')) as {
      runtimeDir: string;
      baseEtcDir: string;
    };
    return { runtime: spec.runtimeDir, etc: spec.baseEtcDir };
  }

  /** A directory in the cache, `ageMs` old, owned by nobody unless `owner` says otherwise. */
  function plantDir(path: string, ageMs: number, owner = NOBODY): void {
    mkdirSync(path);
    writeFileSync(join(path, 'file'), 'kept\n');
    chownSync(path, owner.uid, owner.gid);
    age(path, ageMs);
  }

  function age(path: string, ageMs: number): void {
    const at = new Date(Date.now() - ageMs);
    utimesSync(path, at, at);
  }

  it('removes an old runtime and base view nobody binds; keeps a live sandbox`s, the server`s own, recent ones, symlinks, foreign names and other owners` entries', async () => {
    const cache = join(top, 'xdg/sandbox-mcp');
    const a = await server('a');
    const live = (await ok(a.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
    const bound = bindsOf(live);
    expect(bound.runtime).toMatch(new RegExp(`^${cache}/runtime/[0-9a-f]{16}$`));

    const b = await server('b');
    const ended = (await ok(b.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
    const unused = bindsOf(ended).runtime;
    expect(unused).not.toBe(bound.runtime);
    await ok(b.client, 'kill_sandbox', { sandbox_id: ended });
    await b.close();
    await waitFor(() => !keysOfLiveMounts()!.has(basename(unused)), "the ended sandbox's mounts to go");

    // Two days unused, by their times: the live sandbox's runtime and base view, the ended one's runtime.
    for (const dir of [bound.runtime, bound.etc, unused]) age(dir, 2 * DAY_MS);
    const planted = {
      oldEtc: join(cache, 'base-etc/00000000000000e1'),
      recent: join(cache, 'runtime/00000000000000a1'),
      foreign: join(cache, 'runtime/not-a-key'),
      root: join(cache, 'runtime/00000000000000a2'),
      symlink: join(cache, 'runtime/00000000000000a3'),
      target: join(top, 'symlink-target'),
    };
    plantDir(planted.oldEtc, 2 * DAY_MS);
    plantDir(planted.recent, 60 * 60_000);
    plantDir(planted.foreign, 2 * DAY_MS);
    plantDir(planted.root, 2 * DAY_MS, { uid: 0, gid: 0 });
    plantDir(planted.target, 2 * DAY_MS);
    symlinkSync(planted.target, planted.symlink);
    lutimesSync(planted.symlink, new Date(Date.now() - 2 * DAY_MS), new Date(Date.now() - 2 * DAY_MS));

    const c = await server('c');
    const fresh = (await ok(c.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
    const own = bindsOf(fresh);
    expect(own.runtime).not.toBe(bound.runtime);
    expect(own.etc).toBe(bound.etc);

    // Removed: the ended sandbox's runtime and the old base view (gone from their names at once,
    // their files in the background: the server logs when they are gone).
    expect(existsSync(unused)).toBe(false);
    expect(existsSync(planted.oldEtc)).toBe(false);
    const pruned = (): Record<string, unknown>[] =>
      c
        .stderr()
        .split('\n')
        .filter((l) => l.includes('"cache pruned"'))
        .map((l) => JSON.parse(l) as Record<string, unknown>);
    await waitFor(() => pruned().length === 2, 'the server to log both prunes');
    // In either order: each is logged when its files are gone.
    expect(pruned().sort((x, y) => String(x.kind).localeCompare(String(y.kind)))).toEqual([
      expect.objectContaining({ kind: 'base-etc', removed: 1, kept_bound: 0, unsure: false }),
      expect.objectContaining({ kind: 'runtime', removed: 1, kept_bound: 1, unsure: false }),
    ]);
    for (const kind of ['runtime', 'base-etc']) expect(readdirSync(join(cache, kind)).filter((n) => n.startsWith('.tmp-'))).toEqual([]);
    // The node they linked stays, with its three names and the links of the two runtimes left (the
    // live sandbox's, the new server's).
    expect(statSync(join(top, 'nodes/a/node')).nlink).toBe(5);
    // Kept: what a live sandbox binds, still whole inside it, and the new server's own.
    expect(readdirSync(join(bound.runtime, 'bin'))).toEqual(['node']);
    const inside = await ok(a.client, 'run_command', { sandbox_id: live, command: 'ls /.sandbox-mcp/runtime/bin /etc/hostname' });
    expect(inside.stdout).toBe('/etc/hostname\n\n/.sandbox-mcp/runtime/bin:\nnode\n');
    expect(existsSync(own.runtime)).toBe(true);
    // Kept: a recent entry, a foreign name, another owner's, a symlink (and what it points at).
    for (const path of [planted.recent, planted.foreign, planted.root, planted.target]) expect(readdirSync(path)).toEqual(['file']);
    expect(lstatSync(planted.symlink).isSymbolicLink()).toBe(true);
  }, 180_000);
});
