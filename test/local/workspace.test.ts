// Workspaces on the local provider against real bubblewrap: the person's directory at /workspace
// through a kernel overlay the launch helper mounts, its upper on the sandbox's tmpfs — the sandbox
// sees and changes the files, the host tree stays byte-for-byte as it was, the changes come from
// the agent (through the upper), writes count in the disk budget, and a template's root holds a
// workspace too. As root the person's files look like the sandbox user's own (an idmapped lower).
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../../shared/protocol.js';
import { loadAgentBundle } from '../../host/providers/agent-bundle.js';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { readWorkspaceChanges } from '../../host/tasks/workspace-changes.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { localSnapshotNote } from '../../host/providers/local/templates/snapshot.js';
import { layerRoot, listTemplates, readTemplate } from '../../host/providers/local/templates/store.js';
import { localSandboxes } from '../support/local-sandboxes.js';
import { isRootOrSkipping } from '../support/prerequisites.js';
import { WORKSPACE_NAMES_FILE } from '../../host/providers/local/sandbox/state-dir.js';
import { KEEPER_SCRIPT, REPO } from '../support/paths.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { BASIC_PROGRAMS, writeTestTemplate } from '../support/test-template.js';
import { SANDBOX_EDITS, SANDBOX_EDITS_CHANGES, treeHash, writeProject } from '../support/workspace-trees.js';

const local = localSandboxes();
const top = realpathSync(mkdtempSync(join(tmpdir(), 'ws-local-')));
afterAll(() => rmSync(top, { recursive: true, force: true }));

/** Bytes on disk below `dir` (du, apparent sizes aside). */
const du = (dir: string) => Number(execFileSync('du', ['-s', '-B1', dir], { encoding: 'utf8' }).split('\t')[0]);

const run = async (id: string, command: string, cwd = '/workspace') => {
  const r = await local.provider.exec(id, command, { timeoutS: 60, cwd });
  return { code: r.exitCode, out: r.stdout.toString('utf8'), err: r.stderr.toString('utf8') };
};

describe('a local workspace', () => {
  it('shows the directory at /workspace, takes writes into the sandbox only, and lists them', async () => {
    const project = join(top, 'project');
    mkdirSync(project);
    writeProject(project);
    // A person's files, not root's (a root server shows them as the sandbox user's).
    chownSync(project, 1000, 1000);
    for (const f of ['README.md', 'src', 'src/app.js', 'src/lib', 'src/lib/util.js', 'obsolete.txt', 'run.sh', 'logo.bin', '.gitignore'])
      chownSync(join(project, f), 1000, 1000);
    const before = treeHash(project);
    const { sandbox_id: id } = await local.create({ workspace: project });

    const seen = await run(id, 'id -u; stat -c "%u %a" . src/app.js; cat src/app.js');
    expect(seen.code).toBe(0);
    const [uid, dirStat, fileStat, content] = seen.out.split('\n');
    expect(dirStat).toBe(`${uid} 755`);
    expect(fileStat).toBe(`${uid} 644`);
    expect(content).toBe("console.log('hello');");

    // The agent's views of the person's directory and of the sandbox's writes are read-only.
    const views = await run(
      id,
      'for f in /.sandbox-mcp/workspace/base/README.md /.sandbox-mcp/workspace/base/new /.sandbox-mcp/workspace/upper/new; do (echo x > $f) 2>/dev/null && echo wrote $f; done; echo done',
    );
    expect(views.out).toBe('done\n');
    const edited = await run(id, SANDBOX_EDITS);
    expect(edited).toMatchObject({ code: 0, err: '' });
    expect(treeHash(project)).toBe(before);

    const agent = new AgentClient(loadAgentBundle(join(REPO, 'dist')));
    const report = await readWorkspaceChanges(local.provider, agent, id, { patch: true });
    expect(report.workspace).toMatchObject({ hostPath: project, path: '/workspace', isBaseFrozen: false });
    expect(report.changes.map((c) => `${c.change} ${c.path}`)).toEqual(SANDBOX_EDITS_CHANGES);
    expect(report.changes.some((c) => c.host_changed)).toBe(false);
    expect(report.patch).toContain("-console.log('hello');\n+console.log('hello, sandbox');\n");
    // Nothing of it on the host, even now.
    expect(treeHash(project)).toBe(before);
    await local.provider.kill(id);
    expect(treeHash(project)).toBe(before);
  });

  it("counts the workspace's writes in the disk budget", async () => {
    const project = join(top, 'budget');
    mkdirSync(project);
    writeFileSync(join(project, 'a.txt'), 'a');
    const { sandbox_id: id } = await local.create({ workspace: project });
    const info = await local.provider.getInfo(id);
    const full = await run(id, 'head -c 4000000000 /dev/zero > big; echo rc=$?; df -k /workspace | tail -1');
    expect(full.out).toContain('rc=1');
    expect(full.err).toMatch(/No space left on device/);
    const sizeKb = Number(full.out.trim().split('\n').pop()!.split(/\s+/)[1]);
    // A base sandbox's workspace gets 3/8 of the budget.
    expect(sizeKb * 1024).toBe((info.disk_size_mb! * 1024 * 1024 * 3) / 8);
    // The usage the dashboard shows counts it: at least the full workspace share is used.
    const usage = await local.provider.usage!(id);
    expect(usage.diskBytes!.used).toBeGreaterThanOrEqual(sizeKb * 1024 - 1024 * 1024);
    await local.provider.kill(id);
  });

  // A bound for a broken run: 18 s at most in 48 runs of the suite (4 s typically).
  it('makes a large workspace (10 000 files, 200 MiB) without copying it: the sandbox holds none of it', async () => {
    const project = join(top, 'large');
    for (let d = 0; d < 100; d++) {
      mkdirSync(join(project, `d${d}`), { recursive: true });
      for (let f = 0; f < 100; f++) writeFileSync(join(project, `d${d}`, `f${f}`), `${d}/${f}\n`);
    }
    // 200 MiB the sandbox reads whole.
    writeFileSync(join(project, 'big.bin'), '');
    truncateSync(join(project, 'big.bin'), 200 * 1024 * 1024);
    const { sandbox_id: id } = await local.create({ workspace: project });
    const r = await run(id, 'find . -type f | wc -l; wc -c < big.bin; df -k /workspace | tail -1');
    const [files, bytes, df] = r.out.trim().split('\n');
    expect([Number(files), Number(bytes)]).toEqual([10_001, 200 * 1024 * 1024]);
    // Its tmpfs holds only what the sandbox wrote: nothing yet.
    expect(Number(df!.split(/\s+/)[2])).toBeLessThan(64);
    // The state directory holds the names, not the files.
    const names = JSON.parse(readFileSync(join(local.sandboxDir(id), WORKSPACE_NAMES_FILE), 'utf8')) as { dirs: Record<string, string[]> };
    expect(Object.values(names.dirs).reduce((n, names) => n + names.length, 0)).toBe(10_101);
    expect(du(local.sandboxDir(id))).toBeLessThan(2 * 1024 * 1024);
    await local.provider.kill(id);
  }, 180_000);

  it('runs the agent against it like any command', async () => {
    const project = join(top, 'agent');
    mkdirSync(project);
    writeFileSync(join(project, 'a.txt'), 'a\n');
    const { sandbox_id: id } = await local.create({ workspace: project });
    const agent = new AgentClient(loadAgentBundle(join(REPO, 'dist')));
    const hello = await agent.call(local.provider, id, { protocol: PROTOCOL_VERSION, op: 'hello' }, { timeoutS: 60 });
    expect(hello.protocol).toBe(1);
    await local.provider.kill(id);
  });
});

describe('a workspace in a sandbox on a template', () => {
  const stateDir = tempStateDir();
  const templatesDir = join(stateDir, 'templates');
  const isRoot = process.getuid?.() === 0;
  let provider: ReturnType<typeof createLocalProvider>;
  afterAll(async () => {
    await provider?.close();
    await destroyStateDir(stateDir);
  });

  it("is the same overlay, its writes on the root's tmpfs, listed through the agent", async () => {
    mkdirSync(templatesDir, { mode: 0o700 });
    writeTestTemplate(templatesDir, 'mini', { programs: BASIC_PROGRAMS, owners: isRoot ? 'native' : 'flattened' });
    // The store's layers are private, as the server's own store keeps them (snapshots refuse otherwise).
    chmodSync(join(templatesDir, 'layers'), 0o700);
    provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT, limits: { diskMb: 32 } });
    const project = join(top, 'on-template');
    mkdirSync(project);
    writeFileSync(join(project, 'a.txt'), 'one\n');
    writeFileSync(join(project, 'gone.txt'), 'bye\n');
    const before = treeHash(project);
    const { sandbox_id: id } = await provider.create({ template: 'mini', workspace: project, timeoutS: 120 });
    try {
      const r = await provider.exec(id, 'cat a.txt && echo two >> a.txt && rm gone.txt && pwd', { timeoutS: 60, cwd: '/workspace' });
      expect([r.exitCode, r.stdout.toString()]).toEqual([0, 'one\n/workspace\n']);
      expect(treeHash(project)).toBe(before);
      // The root's tmpfs holds the workspace's writes: a file past the root's share fails.
      const full = await provider.exec(id, 'head -c 64000000 /dev/zero > /workspace/big; echo rc=$?', { timeoutS: 60 });
      expect(full.stdout.toString()).toContain('rc=1');
      await provider.exec(id, 'rm -f /workspace/big', { timeoutS: 60 });
      const agent = new AgentClient(loadAgentBundle(join(REPO, 'dist')));
      const report = await readWorkspaceChanges(provider, agent, id, { patch: true });
      expect(report.changes.map((c) => `${c.change} ${c.path}`)).toEqual(['modified a.txt', 'deleted gone.txt']);
      expect(report.patch).toContain(' one\n+two\n');
      expect(treeHash(project)).toBe(before);
      // A snapshot keeps the workspace as the sandbox sees it, as plain files in its layer's /workspace.
      const snap = await provider.snapshot!(id, 'with-ws');
      expect(snap.note).toBe(localSnapshotNote(false, true));
      const layer = layerRoot(templatesDir, readTemplate(templatesDir, 'with-ws')!.layers[0]!);
      expect(readFileSync(join(layer, 'workspace', 'a.txt'), 'utf8')).toBe('one\ntwo\n');
      expect(readdirSync(join(layer, 'workspace'))).toEqual(['a.txt']);
      expect(treeHash(project)).toBe(before);
    } finally {
      await provider.kill(id);
    }
  });

  it('refuses a snapshot whose /workspace would merge with files its template holds there, storing nothing', async () => {
    const project = join(top, 'on-snapshot');
    mkdirSync(project);
    writeFileSync(join(project, 'b.txt'), 'b\n');
    // 'with-ws' (the test above) holds /workspace/a.txt: this sandbox's workspace hides it, a snapshot's copy would not.
    const { sandbox_id: id } = await provider.create({ template: 'with-ws', workspace: project, timeoutS: 120 });
    try {
      const seen = await provider.exec(id, 'ls', { timeoutS: 60, cwd: '/workspace' });
      expect(seen.stdout.toString()).toBe('b.txt\n');
      await expect(provider.snapshot!(id, 'again')).rejects.toMatchObject({ category: 'unsupported', code: 'workspace_snapshot' });
      expect(
        listTemplates(templatesDir)
          .map((t) => t.name)
          .sort(),
      ).toEqual(['mini', 'with-ws']);
    } finally {
      await provider.kill(id);
    }
  });
});

describe('a workspace on a root server with a configured sandbox uid and group', () => {
  const stateDir = tempStateDir();
  let provider: ReturnType<typeof createLocalProvider>;
  afterAll(async () => {
    await provider?.close();
    await destroyStateDir(stateDir);
  });

  it("runs as that uid and group, the person's files shown as theirs", async () => {
    if (!isRootOrSkipping('a configured sandbox uid')) return;
    provider = createLocalProvider({ stateDir, keeperScript: KEEPER_SCRIPT, sandboxUid: 23456, sandboxGid: 34567 });
    const project = join(top, 'configured');
    mkdirSync(project);
    writeFileSync(join(project, 'a.txt'), 'a\n');
    chownSync(project, 1000, 1001);
    chownSync(join(project, 'a.txt'), 1000, 1001);
    const { sandbox_id: id } = await provider.create({ workspace: project, timeoutS: 120 });
    try {
      const r = await provider.exec(id, 'id -u; id -g; stat -c "%u %g" a.txt; touch b.txt && stat -c "%u %g" b.txt', {
        timeoutS: 60,
        cwd: '/workspace',
      });
      expect(r.stdout.toString()).toBe('23456\n34567\n23456 34567\n23456 34567\n');
    } finally {
      await provider.kill(id);
    }
  });
});
