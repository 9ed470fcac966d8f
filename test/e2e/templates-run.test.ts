// Sandboxes on templates through the BUILT server and a real MCP client, with the server running as
// root and as an unprivileged user (nobody): create_sandbox lists this server's templates (read at
// every tools/list) and runs on one; run_command, run_code, the file tools and tasks work there, as
// root inside, on a template made in the test from host programs, python (with Debian's pip) and their
// libraries — and no node — through the sandbox's resident agent; a system-wide pip install there
// is that sandbox's alone.
import { chownSync, existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ok, startHttp, toolError, type HttpServer } from '../support/built-server.js';
import { isRootOrSkipping, requireSandboxes } from '../support/prerequisites.js';
import { BASIC_PROGRAMS, hostProgram, writeTestTemplate } from '../support/test-template.js';
import { residentRecordOf } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const NOBODY = { uid: 65534, gid: 65534 };
const users = [
  { name: 'root', as: undefined },
  { name: 'an unprivileged user (nobody)', as: NOBODY },
] as const;
// Starting a server as another user, and writing templates for it, need root.
const asRoot = isRootOrSkipping('the template sandbox tests (a server as root and as nobody)');
// Debian's pip (python3-pip), copied into the template: a prerequisite, never a skip.
const HOST_PIP = '/usr/lib/python3/dist-packages/pip';

// A wheel made inside the sandbox (python's zipfile: no index, no network), installed system-wide.
const PIP_INSTALL = `python3 - <<'EOF'
import zipfile
with zipfile.ZipFile('/tmp/greet-1.0-py3-none-any.whl', 'w') as z:
    z.writestr('greet/__init__.py', 'def hello():\\n    return "hello from greet"\\n')
    z.writestr('greet-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: greet\\nVersion: 1.0\\n')
    z.writestr('greet-1.0.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')
    z.writestr('greet-1.0.dist-info/RECORD', '')
EOF
python3 -m pip install -q --no-index --no-cache-dir --disable-pip-version-check --break-system-packages /tmp/greet-1.0-py3-none-any.whl`;
const IMPORT_GREET = "cd / && python3 -c 'import greet; print(greet.hello(), greet.__file__)'";

beforeAll(() => {
  requireSandboxes();
  if (!existsSync(HOST_PIP)) throw new Error(`${HOST_PIP} is required by these tests: apt-get install python3-pip (.ci/run installs it)`);
});

describe.skipIf(!asRoot).each(users)('sandboxes on a template, server running as $name', ({ as }) => {
  const stateDir = mkdtempSync(join(tmpdir(), 'sandbox-mcp-templates-run-'));
  const templatesDir = join(stateDir, 'templates');
  const owners = as ? ('flattened' as const) : ('native' as const);
  let server: HttpServer;
  let client: Client;

  beforeAll(async () => {
    mkdirSync(templatesDir, { mode: 0o700 });
    const python = hostProgram('python3');
    writeTestTemplate(templatesDir, 'py', {
      programs: [...BASIC_PROGRAMS, python],
      // Its standard library: /usr/lib/python3.X, named after the program python3 is.
      trees: [join('/usr/lib', basename(realpathSync(python))), HOST_PIP],
      skipInTrees: /^(__pycache__|config-.*|test|idlelib|tkinter|ensurepip|lib2to3|pydoc_data)$/,
      owners,
      ...(as ? { owner: as } : {}),
    });
    if (as) for (const dir of [stateDir, templatesDir]) chownSync(dir, as.uid, as.gid);
    server = await startHttp({ SANDBOX_MCP_STATE_DIR: stateDir }, [], as);
    client = (await server.connect()).client;
  });

  afterAll(async () => {
    await client?.close();
    await server?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  const description = async (): Promise<string> =>
    (await client.listTools()).tools.find((t) => t.name === 'create_sandbox')!.description ?? '';

  it("create_sandbox's description lists the server's templates, a new one without a restart; an unknown one is not_found naming `template`", async () => {
    expect(await description()).toMatch(/Templates: .*base.*\bpy\b/s);
    expect(await description()).not.toMatch(/\blate\b/);
    writeTestTemplate(templatesDir, 'late', { programs: BASIC_PROGRAMS, owners, ...(as ? { owner: as } : {}) });
    expect(await description()).toMatch(/\blate\b/);
    const e = await toolError(client, 'create_sandbox', { template: 'nosuch' });
    expect(e.category).toBe('not_found');
    expect(e.suggestion).toMatch(/^template: /);
  });

  it('run_command, run_code, the file tools and tasks work on it, as root inside, with the agent on the server’s node', async () => {
    const meta = await ok(client, 'create_sandbox', { template: 'py', timeout: 300 });
    expect(meta.template).toBe('py');
    const id = meta.sandbox_id as string;
    expect((await ok(client, 'get_sandbox', { sandbox_id: id })).template).toBe('py');
    expect(((await ok(client, 'list_sandboxes', {})).sandboxes as { template: string }[]).map((s) => s.template)).toEqual(['py']);

    const who = await ok(client, 'run_command', {
      sandbox_id: id,
      command: 'id -u; command -v node || echo no node; echo edit > /usr/lib/edited && cat /usr/lib/edited',
    });
    expect(who).toMatchObject({ exit_code: 0, stdout: '0\nno node\nedit\n' });
    const code = await ok(client, 'run_code', { sandbox_id: id, code: 'import os\nprint(6 * 7, os.getuid())' });
    expect(code).toMatchObject({ exit_code: 0, stdout: '42 0\n' });

    await ok(client, 'write_file', { sandbox_id: id, path: '/etc/app.conf', content: 'setting=1\n' });
    expect((await ok(client, 'read_file', { sandbox_id: id, path: '/etc/app.conf' })).content).toBe('setting=1\n');
    const listed = (await ok(client, 'list_files', { sandbox_id: id, path: '/etc' })).entries as { name: string }[];
    expect(listed.map((e) => e.name)).toEqual(expect.arrayContaining(['app.conf', 'passwd']));

    const task = await ok(client, 'start_task', { sandbox_id: id, command: 'for i in 1 2 3; do echo "line $i"; done; cat /etc/app.conf' });
    let view = task;
    await waitFor(async () => {
      view = await ok(client, 'get_task', { sandbox_id: id, task_id: task.task_id, wait: 5 });
      return view.state !== 'running';
    }, 'the task to finish');
    expect(view).toMatchObject({ state: 'succeeded', exit_code: 0, stdout: 'line 1\nline 2\nline 3\nsetting=1\n' });

    // The sandbox has a resident agent, on the agent runtime (the root has no node): agent calls are
    // messages to it. Counted in the sandbox's pid namespace, which hands out pids in order: five
    // get_task and a cancel start nothing (a per-call agent starts a shell and node, and node's
    // threads, for each), once the supervisor the resident boots after a start is waiting.
    await waitFor(() => residentRecordOf(stateDir, id)?.resident, 'the resident to run');
    const probe = async (command: string) =>
      (await ok(client, 'run_command', { sandbox_id: id, command, background_after: 0 })).stdout as string;
    await waitFor(async () => /\.warm-\d+\.reserve/.test(await probe('ls -a ~/.local/state/sandbox-agent')), 'a supervisor booted ahead');
    const before = Number(await probe('echo $$'));
    for (let i = 0; i < 5; i++) await ok(client, 'get_task', { sandbox_id: id, task_id: task.task_id });
    await ok(client, 'cancel_task', { sandbox_id: id, task_id: task.task_id });
    expect(Number(await probe('echo $$')) - before).toBeLessThanOrEqual(2);
    expect(residentRecordOf(stateDir, id)).toMatchObject({ restarts: 0 });
    await ok(client, 'kill_sandbox', { sandbox_id: id });
  });

  it('a system-wide pip install works in a sandbox on a template, for that sandbox alone', async () => {
    const [one, other] = await Promise.all([
      ok(client, 'create_sandbox', { template: 'py' }),
      ok(client, 'create_sandbox', { template: 'py' }),
    ]);
    const installed = await ok(client, 'run_command', { sandbox_id: one.sandbox_id, command: `${PIP_INSTALL} && ${IMPORT_GREET}` });
    expect(installed.exit_code, installed.stderr).toBe(0);
    // Where Debian's python puts a system-wide install: /usr/local/lib/python3.X/dist-packages.
    const pythonDir = basename(realpathSync(hostProgram('python3')));
    expect(installed.stdout).toBe(`hello from greet /usr/local/lib/${pythonDir}/dist-packages/greet/__init__.py\n`);
    const unseen = await ok(client, 'run_command', { sandbox_id: other.sandbox_id, command: IMPORT_GREET });
    expect(unseen.exit_code).toBe(1);
    expect(unseen.stderr).toContain("ModuleNotFoundError: No module named 'greet'");
    for (const sb of [one, other]) await ok(client, 'kill_sandbox', { sandbox_id: sb.sandbox_id });
  });
});
