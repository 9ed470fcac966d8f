// snapshot_sandbox and `sandbox-mcp snapshot` on the local provider, through the built server and
// CLI with real sandboxes on a template imported in the test (a tarball of a few host programs
// and their libraries): a snapshot holds the sandbox's files — its home, its edits under /usr,
// its deletions — and not its /tmp, its tasks or the agent's own; a sandbox created from it
// starts with them; the original runs on; owners come back as the template's. Removal is
// refused while a live sandbox runs on a template, and a layer stays while a snapshot lists it.
// Snapshot storage is capped: past the cap a snapshot is refused and nothing of it is kept. A
// sandbox with a workspace keeps it: /workspace as it saw it, as plain files of the new template,
// the person's directory untouched, its bytes counted against the cap.
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chownSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { TemplateListingSchema } from '../../host/cli/template.js';
import { SnapshotResultSchema } from '../../host/cli/snapshot.js';
import { localSnapshotNote } from '../../host/providers/local/templates/snapshot.js';
import { layerRoot, readTemplate, templatesDir } from '../../host/providers/local/templates/store.js';
import { connectStdio, ok, serverEnv, toolError, type StdioServer } from '../support/built-server.js';
import { HOST_JS } from '../support/paths.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { makeMiniRootTar } from '../support/mini-root.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { treeHash, writeProject } from '../support/workspace-trees.js';

// Each test gets a state directory of its own, with `mini` imported (see beforeEach): none depends
// on the templates or snapshots another test made, removed or left behind.
let env: { SANDBOX_MCP_STATE_DIR: string };
let store: string;
const stateDirs: string[] = [];
let tarball: string;
const open: StdioServer[] = [];

function cli(args: string[], extra: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOST_JS, ...args], { env: serverEnv({ ...env, ...extra }) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

async function server(args: string[] = []): Promise<StdioServer> {
  const s = await connectStdio(env, args);
  open.push(s);
  return s;
}

async function run(s: StdioServer, sandboxId: string, command: string): Promise<{ exit_code: number; stdout: string; stderr: string }> {
  return ok(s.client, 'run_command', { sandbox_id: sandboxId, command }) as Promise<{ exit_code: number; stdout: string; stderr: string }>;
}

/** What a failure must not leave in the store. */
function leftovers(): string[] {
  return [
    ...readdirSync(store).filter((n) => n.startsWith('.tmp-')),
    ...readdirSync(join(store, 'layers')).filter((n) => !/^[0-9a-f]{16}$/.test(n)),
    ...readdirSync(join(store, '.claims')),
  ];
}

beforeAll(() => {
  requireSandboxes();
  tarball = makeMiniRootTar();
});

beforeEach(async () => {
  const stateDir = tempStateDir();
  stateDirs.push(stateDir);
  env = { SANDBOX_MCP_STATE_DIR: stateDir };
  store = templatesDir(stateDir);
  const r = await cli(['template', 'import', 'mini', tarball]);
  if (r.code !== 0) throw new Error(`import failed: ${r.stderr}`);
});

afterAll(async () => {
  await Promise.allSettled(open.map((s) => s.close()));
  for (const dir of stateDirs) await destroyStateDir(dir);
  rmSync(tarball, { force: true });
});

describe('snapshot_sandbox on the local provider', () => {
  it('saves home, edits and deletions, not /tmp, tasks or the agent; a new sandbox starts with them; the original runs on', async () => {
    const s = await server();
    const sb = await ok(s.client, 'create_sandbox', { template: 'mini', timeout: 600 });
    const setup = await run(
      s,
      sb.sandbox_id,
      'mkdir -p ~/proj /usr/local/share/extra && echo hello > ~/proj/a.txt && echo system > /usr/local/share/extra/f && ' +
        'rm /etc/mini-root && echo scratch > /tmp/scratch && echo vt > /var/tmp/vt && dd if=/dev/zero of=~/proj/blob bs=1k count=300 status=none',
    );
    expect(setup.exit_code, setup.stderr).toBe(0);
    const task = await ok(s.client, 'start_task', { sandbox_id: sb.sandbox_id, command: 'echo task-output; sleep 300' });

    const snap = SnapshotResultSchema.parse(await ok(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'snap1' }));
    expect(snap).toMatchObject({ sandbox_id: sb.sandbox_id, template: 'snap1' });
    expect(snap.note).toBe(localSnapshotNote(false));
    expect(snap.note).toContain('processes and tasks are not carried over');
    // The 300 KiB blob and the rest, but not the agent's install (about 1 MiB).
    expect(snap.size_bytes).toBeGreaterThan(300 * 1024);
    expect(snap.size_bytes).toBeLessThan(800 * 1024);

    // The original runs on, its task too.
    expect((await run(s, sb.sandbox_id, 'cat ~/proj/a.txt /tmp/scratch')).stdout).toBe('hello\nscratch\n');
    expect((await ok(s.client, 'get_task', { sandbox_id: sb.sandbox_id, task_id: task.task_id })).state).toBe('running');

    const copy = await ok(s.client, 'create_sandbox', { template: 'snap1', timeout: 600 });
    expect(copy.template).toBe('snap1');
    const seen = await run(
      s,
      copy.sandbox_id,
      'cat ~/proj/a.txt /usr/local/share/extra/f; stat -c "%u:%g %s" ~/proj/a.txt ~/proj/blob; ' +
        'ls /etc/mini-root /tmp/scratch /var/tmp/vt 2>&1; ls -a /tmp /var/tmp; ls ~/.local/state/sandbox-agent 2>&1; pgrep -c sleep || true',
    );
    expect(seen.stdout).toContain('hello\nsystem\n0:0 6\n0:0 307200\n');
    // The deletion holds (a whiteout in the snapshot layer hides the template's file); /tmp and /var/tmp start empty.
    expect(seen.stdout).toMatch(/ls: cannot access '\/etc\/mini-root': No such file or directory/);
    expect(seen.stdout).toMatch(/ls: cannot access '\/tmp\/scratch': No such file or directory/);
    expect(seen.stdout).toMatch(/ls: cannot access '\/var\/tmp\/vt': No such file or directory/);
    // Tasks are not carried over: no task directory, and the task's handle means nothing here.
    expect(await toolError(s.client, 'get_task', { sandbox_id: copy.sandbox_id, task_id: task.task_id })).toMatchObject({
      category: 'not_found',
    });

    // Later writes in one are not seen by the other.
    await run(s, copy.sandbox_id, 'echo changed > ~/proj/a.txt');
    expect((await run(s, sb.sandbox_id, 'cat ~/proj/a.txt')).stdout).toBe('hello\n');

    const listing = TemplateListingSchema.parse(JSON.parse((await cli(['template', 'ls', '--json'])).stdout)).templates;
    const snapRecord = listing.find((t) => t.name === 'snap1')!;
    expect(snapRecord.source).toEqual({ kind: 'snapshot', sandbox_id: sb.sandbox_id.replace(/^local:/, ''), parent: 'mini' });
    expect(snapRecord.layers.slice(1)).toEqual(readTemplate(store, 'mini')!.layers);
    expect(snapRecord.used_by).toEqual([copy.sandbox_id]);
    expect(listing.find((t) => t.name === 'mini')!.used_by).toEqual([sb.sandbox_id]);
    // In the layer, files are the template's root's (the sandbox's id block shifted back).
    expect(existsSync(join(layerRoot(store, snapRecord.layers[0]!), 'home/user/proj/a.txt'))).toBe(true);
    expect(existsSync(join(layerRoot(store, snapRecord.layers[0]!), '.sandbox-mcp'))).toBe(false);
    expect(existsSync(join(layerRoot(store, snapRecord.layers[0]!), 'home/user/.sandbox-mcp'))).toBe(false);

    // Removal is refused while a live sandbox runs on the template, and changes nothing.
    const refused = await cli(['template', 'rm', 'mini']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('conflict: Live sandboxes run on this template');
    expect(readTemplate(store, 'mini')).toBeDefined();

    // Once it ends, the template goes, but its layer stays while the snapshot lists it.
    await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    const removed = await cli(['template', 'rm', 'mini']);
    expect(removed.code, removed.stderr).toBe(0);
    expect(existsSync(layerRoot(store, snapRecord.layers[1]!))).toBe(true);
    const again = await ok(s.client, 'create_sandbox', { template: 'snap1' });
    expect((await run(s, again.sandbox_id, 'cat ~/proj/a.txt; ls /usr/bin/bash')).stdout).toBe('hello\n/usr/bin/bash\n');
    for (const id of [copy.sandbox_id, again.sandbox_id]) await ok(s.client, 'kill_sandbox', { sandbox_id: id });
    expect((await cli(['template', 'rm', 'snap1'])).code).toBe(0);
    expect(readdirSync(join(store, 'layers'))).toEqual([]);
  });

  it('is refused for a base sandbox, for a name taken, and past the snapshot storage cap — keeping nothing', async () => {
    const s = await server(['--max-snapshot-storage', '1']);
    const base = await ok(s.client, 'create_sandbox', {});
    expect(await toolError(s.client, 'snapshot_sandbox', { sandbox_id: base.sandbox_id, name: 'from-base' })).toMatchObject({
      category: 'unsupported',
      code: 'snapshot_needs_template',
    });

    const sb = await ok(s.client, 'create_sandbox', { template: 'mini' });
    expect(await toolError(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'mini' })).toMatchObject({
      category: 'conflict',
      code: 'template_exists',
    });
    expect((await ok(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'small' })).template).toBe('small');
    await run(s, sb.sandbox_id, 'dd if=/dev/zero of=~/big bs=1M count=2 status=none');
    const full = await toolError(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'big' });
    expect(full).toMatchObject({ category: 'insufficient_resources', code: 'snapshot_storage_full' });
    expect(full.suggestion).toMatch(
      /^Snapshot storage is full: this snapshot needs 2\.\d MiB and snapshots already hold 0\.\d MiB of the 1\.0 MiB/,
    );
    expect(full.suggestion).toContain('--max-snapshot-storage');
    expect(readTemplate(store, 'big')).toBeUndefined();
    expect(leftovers()).toEqual([]);

    // The command line: the same cap from its flag; a sandbox id it does not know.
    const cliFull = await cli(['snapshot', sb.sandbox_id, 'big', '--max-snapshot-storage', '2']);
    expect(cliFull.code).toBe(1);
    expect(cliFull.stderr).toContain('insufficient_resources: Snapshot storage is full');
    const made = await cli(['snapshot', sb.sandbox_id, 'big', '--json', '--max-snapshot-storage', '10']);
    expect(made.code, made.stderr).toBe(0);
    expect(SnapshotResultSchema.parse(JSON.parse(made.stdout))).toMatchObject({ sandbox_id: sb.sandbox_id, template: 'big' });
    expect((await cli(['snapshot', 'local:nosuchsandbox', 'x'])).stderr).toMatch(/^sandbox-mcp: not_found: /);
    for (const id of [base.sandbox_id, sb.sandbox_id]) await ok(s.client, 'kill_sandbox', { sandbox_id: id });
    for (const name of ['small', 'big']) expect((await cli(['template', 'rm', name])).code).toBe(0);
  });
});

describe('snapshot_sandbox of a sandbox with a workspace', () => {
  const top = realpathSync(mkdtempSync(join(tmpdir(), 'sandbox-mcp-snap-ws-')));
  const wsEnv = { SANDBOX_MCP_WORKSPACE_ALLOW: top };
  afterAll(() => rmSync(top, { recursive: true, force: true }));
  // One host file edited, one added (in a new directory), one deleted.
  const EDITS = 'printf "edited\\n" > src/app.js && mkdir src/new && printf "added\\n" > src/new/added.txt && rm obsolete.txt';
  // Every entry's type and mode, every file's hash: run in the sandbox's /workspace and in a host copy given the same edits.
  const LISTING = 'find . -mindepth 1 | sort | xargs stat -c "%n %F %a" && find . -type f | sort | xargs sha256sum';

  it('keeps /workspace as the sandbox saw it, as plain files a new sandbox starts with; the host directory is unchanged', async () => {
    const project = join(top, 'project');
    writeProject(project);
    const hostBefore = treeHash(project);
    const expected = join(top, 'expected');
    cpSync(project, expected, { recursive: true });
    execFileSync('sh', ['-c', EDITS], { cwd: expected });
    const expectedListing = execFileSync('sh', ['-c', LISTING], { cwd: expected, encoding: 'utf8' });

    const s = await connectStdio({ ...env, ...wsEnv });
    open.push(s);
    const sb = await ok(s.client, 'create_sandbox', { template: 'mini', workspace: project, timeout: 600 });
    const edited = await run(s, sb.sandbox_id, EDITS);
    expect(edited.exit_code, edited.stderr).toBe(0);

    const snap = SnapshotResultSchema.parse(await ok(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'ws-snap' }));
    expect(snap.template).toBe('ws-snap');
    expect(snap.note).toBe(localSnapshotNote(false, true));
    expect(snap.note).toContain('kept as plain files at /workspace');
    expect(snap.note).toContain('belong to the original sandbox');
    // The command line does the same.
    const made = await cli(['snapshot', sb.sandbox_id, 'ws-snap-cli', '--json']);
    expect(made.code, made.stderr).toBe(0);
    expect(SnapshotResultSchema.parse(JSON.parse(made.stdout)).note).toBe(localSnapshotNote(false, true));

    for (const name of ['ws-snap', 'ws-snap-cli']) {
      const copy = await ok(s.client, 'create_sandbox', { template: name });
      const seen = await run(s, copy.sandbox_id, `cd /workspace && ${LISTING}`);
      expect(seen.exit_code, seen.stderr).toBe(0);
      expect(seen.stdout).toBe(expectedListing);
      expect(seen.stdout).not.toContain('obsolete.txt');
      expect((await run(s, copy.sandbox_id, 'cat /workspace/src/app.js /workspace/src/new/added.txt')).stdout).toBe('edited\nadded\n');
      // It has no workspace of its own: nothing to diff or apply.
      const noWs = await toolError(s.client, 'workspace_changes', { sandbox_id: copy.sandbox_id });
      expect([noWs.category, noWs.code]).toEqual(['not_found', 'no_workspace']);
      await ok(s.client, 'kill_sandbox', { sandbox_id: copy.sandbox_id });
    }
    // The original keeps its workspace and its changes to apply.
    const changes = await ok(s.client, 'workspace_changes', { sandbox_id: sb.sandbox_id });
    expect((changes.changes as { change: string; path: string }[]).map((c) => `${c.change} ${c.path}`).sort()).toEqual([
      'added src/new',
      'added src/new/added.txt',
      'deleted obsolete.txt',
      'modified src/app.js',
    ]);
    await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    expect(treeHash(project)).toBe(hostBefore);
    for (const name of ['ws-snap', 'ws-snap-cli']) expect((await cli(['template', 'rm', name])).code).toBe(0);
  });

  it("counts the workspace's files against the snapshot storage cap: refused past it, nothing kept", async () => {
    const project = join(top, 'big');
    writeProject(project);
    writeFileSync(join(project, 'data.bin'), Buffer.alloc(2 * 1024 * 1024, 7));
    const hostBefore = treeHash(project);
    const s = await connectStdio({ ...env, ...wsEnv }, ['--max-snapshot-storage', '1']);
    open.push(s);
    // The sandbox writes nothing: the 2 MiB are the person's file, seen through the workspace.
    const sb = await ok(s.client, 'create_sandbox', { template: 'mini', workspace: project });
    const full = await toolError(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'ws-big' });
    expect(full).toMatchObject({ category: 'insufficient_resources', code: 'snapshot_storage_full' });
    expect(full.suggestion).toMatch(/^Snapshot storage is full: this snapshot needs 2\.\d MiB/);
    expect(readTemplate(store, 'ws-big')).toBeUndefined();
    expect(leftovers()).toEqual([]);
    await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
    expect(treeHash(project)).toBe(hostBefore);
  });
});

describe('snapshot_sandbox of files the server may not copy', () => {
  const isRoot = isRootOrSkipping('a host file of another owner, and a root-only host directory');
  const top = realpathSync(mkdtempSync(join(tmpdir(), 'sandbox-mcp-snap-host-')));
  afterAll(() => rmSync(top, { recursive: true, force: true }));

  it.runIf(isRoot)("refuses, naming it, a workspace file the sandbox may not read (another owner's, mode 0600)", async () => {
    const project = join(top, 'project');
    writeProject(project);
    writeFileSync(join(project, 'private.txt'), 'private\n', { mode: 0o600 });
    chownSync(join(project, 'private.txt'), 4242, 4242);
    const s = await connectStdio({ ...env, SANDBOX_MCP_WORKSPACE_ALLOW: top });
    open.push(s);
    const sb = await ok(s.client, 'create_sandbox', { template: 'mini', workspace: project });
    const refused = await toolError(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'ws-private' });
    expect(refused).toMatchObject({ category: 'permission_denied', code: 'snapshot_file_unreadable' });
    expect(refused.suggestion).toMatch(/^The snapshot could not read "\/workspace\/private\.txt": permission denied/);
    expect(readTemplate(store, 'ws-private')).toBeUndefined();
    expect(leftovers()).toEqual([]);
    await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
  });

  it.runIf(isRoot)(
    'never copies a host file through a directory the sandbox swaps for a symlink while snapshots run',
    async () => {
      // The host's secret: root's file of mode 0600 in a directory of mode 0700, which the sandbox cannot see.
      const secretDir = join(top, 'secret');
      mkdirSync(secretDir, { mode: 0o700 });
      const marker = `host-marker-${randomBytes(12).toString('hex')}`;
      writeFileSync(join(secretDir, 'secret'), `${marker}\n`, { mode: 0o600 });
      const s = await server();
      const sb = await ok(s.client, 'create_sandbox', { template: 'mini' });
      // ~/work/state (the sandbox's own: renaming it needs no copy-up) and a symlink to the host directory
      // trade places in a loop, in the background, as fast as mv runs. The real one holds a file of the
      // same name, so a copy that listed either and then entered the link would copy the host's. Not
      // ~/.local/state: that holds the agent's state folder (its resident's and supervisors' files,
      // which a snapshot leaves out by that path), whose churn a loop moving it would bring into the copy.
      const swap =
        'cd ~/work && ln -s ' +
        secretDir +
        ' stateL && ' +
        '(while :; do mv state stateX; mv stateL state; mv state stateL; mv stateX state; done) </dev/null >/dev/null 2>&1 &';
      const started = await ok(s.client, 'run_command', {
        sandbox_id: sb.sandbox_id,
        command: `mkdir -p ~/work/state && echo decoy > ~/work/state/secret && ${swap}`,
      });
      expect(started.exit_code, started.stderr).toBe(0);
      const failures: string[] = [];
      let made = 0;
      for (let i = 0; i < 30; i++) {
        const r = await s.client.callTool({ name: 'snapshot_sandbox', arguments: { sandbox_id: sb.sandbox_id, name: `race-${i}` } });
        if (!r.isError) made++;
        else failures.push((JSON.parse((r.content as { text: string }[])[0]!.text) as { error: { code?: string } }).error.code ?? 'none');
      }
      await ok(s.client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
      // Nowhere in the state directory (the template store with every layer made) is the host's file.
      const grep = 'grep -rlF -D skip -e "$1" "$2"; [ $? -le 1 ]';
      const found = execFileSync('sh', ['-c', grep, 'sh', marker, env.SANDBOX_MCP_STATE_DIR], { encoding: 'utf8' }).trim();
      expect(found).toBe('');
      // A try the swap caught is refused as such, never as an internal failure; the others are made.
      expect(failures.filter((code) => code !== 'snapshot_changed_while_copying')).toEqual([]);
      expect(made + failures.length).toBe(30);
    },
    60_000,
  );
});

describe('snapshot_sandbox on a server that is not root', () => {
  const isRoot = isRootOrSkipping('a server running as nobody');
  const NOBODY = { uid: 65534, gid: 65534 };
  const nobodyState = mkdtempSync(join(tmpdir(), 'sandbox-mcp-snap-nobody-'));
  const nobodyEnv = { SANDBOX_MCP_STATE_DIR: nobodyState };
  let readableTar: string;

  // The template both tests run on, imported by the server's user (neither test changes it).
  beforeAll(async () => {
    if (!isRoot) return;
    chownSync(nobodyState, NOBODY.uid, NOBODY.gid);
    readableTar = join(nobodyState, 'mini.tar');
    copyFileSync(tarball, readableTar);
    chownSync(readableTar, NOBODY.uid, NOBODY.gid);
    const imported = await new Promise<number>((resolve) =>
      execFile(
        process.execPath,
        [hostJsReadableBy(NOBODY), 'template', 'import', 'mini', readableTar],
        { env: serverEnv(nobodyEnv), ...NOBODY, cwd: '/' },
        (e) => resolve(e ? 1 : 0),
      ),
    );
    if (imported !== 0) throw new Error('the import as nobody failed');
  });
  // Its workspaces: beside its state directory, not in it (a workspace may not hold or lie in the server's own).
  const allowed = mkdtempSync(join(tmpdir(), 'sandbox-mcp-snap-nobody-ws-'));
  afterAll(() => {
    rmSync(nobodyState, { recursive: true, force: true });
    rmSync(allowed, { recursive: true, force: true });
  });

  it.runIf(isRoot)("keeps deletions (whiteouts made without privileges) and the files, all the server user's", async () => {
    const s = await connectStdio(nobodyEnv, [], NOBODY);
    open.push(s);
    const sb = await ok(s.client, 'create_sandbox', { template: 'mini' });
    expect((await run(s, sb.sandbox_id, 'rm /etc/mini-root && mkdir -p ~/p && echo kept > ~/p/f && id -u')).stdout).toBe('0\n');
    const snap = await ok(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'flat-snap' });
    expect(snap.template).toBe('flat-snap');
    const copy = await ok(s.client, 'create_sandbox', { template: 'flat-snap' });
    const seen = await run(s, copy.sandbox_id, 'cat ~/p/f; ls /etc/mini-root 2>&1; stat -c %u ~/p/f');
    expect(seen.stdout).toMatch(/^kept\nls: cannot access '\/etc\/mini-root': No such file or directory\n0\n$/);
    const store = templatesDir(nobodyState);
    const record = readTemplate(store, 'flat-snap')!;
    expect(record.owners).toBe('flattened');
    expect(statSync(join(layerRoot(store, record.layers[0]!), 'home/user/p/f')).uid).toBe(NOBODY.uid);
  });

  it.runIf(isRoot)("keeps a workspace's files as the sandbox saw them", async () => {
    const project = join(allowed, 'project');
    writeProject(project);
    execFileSync('chown', ['-R', `${NOBODY.uid}:${NOBODY.gid}`, allowed]);
    const hostBefore = treeHash(project);
    const s = await connectStdio({ ...nobodyEnv, SANDBOX_MCP_WORKSPACE_ALLOW: allowed }, [], NOBODY);
    open.push(s);
    const sb = await ok(s.client, 'create_sandbox', { template: 'mini', workspace: project });
    expect((await run(s, sb.sandbox_id, 'echo edited > src/app.js && echo added > added.txt && rm obsolete.txt')).exit_code).toBe(0);
    const snap = await ok(s.client, 'snapshot_sandbox', { sandbox_id: sb.sandbox_id, name: 'flat-ws' });
    expect(snap.note).toBe(localSnapshotNote(false, true));
    const copy = await ok(s.client, 'create_sandbox', { template: 'flat-ws' });
    const seen = await run(
      s,
      copy.sandbox_id,
      'cd /workspace && cat src/app.js added.txt README.md; ls obsolete.txt 2>&1; stat -c %u added.txt',
    );
    expect(seen.stdout).toBe(
      "edited\nadded\n# Project\n\nA project to work on.\nls: cannot access 'obsolete.txt': No such file or directory\n0\n",
    );
    expect(treeHash(project)).toBe(hostBefore);
  });
});
