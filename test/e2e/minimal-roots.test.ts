// A root with nothing but a shell (issue 37), through the built server: commands, tasks and the
// file tools work (the agent brings its own runtime, and with it the resident's file operations;
// pid 1 and the command prelude use builtins). Without a resident, a file tool needing a program
// the root lacks fails at once, naming it: local/templates. One template is sh and the libraries it links (test/support/test-template.ts); the
// other a static shell alone (busybox-static as /bin/sh: no loader, no libc, nothing else).
import { existsSync, mkdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { localServer, ok } from '../support/built-server.js';
import { residentRecordOf } from '../support/state-dir.js';
import { layerRoot } from '../../host/providers/local/templates/store.js';
import { hostProgram, writeTestTemplate } from '../support/test-template.js';
import { waitFor } from '../support/wait.js';

const STATIC_SHELL = '/bin/busybox';

/** The two templates, in the server's state directory: sh and its libraries; a static shell alone. */
function writeTemplates(stateDir: string): void {
  const templates = join(stateDir, 'templates');
  mkdirSync(templates, { mode: 0o700 });
  const isRoot = process.getuid?.() === 0;
  writeTestTemplate(templates, 'shell-only', { programs: [hostProgram('sh')], owners: isRoot ? 'native' : 'flattened' });
  // Debian's busybox-static (.ci/run installs it): statically linked, so its root has no loader or libc.
  if (!existsSync(STATIC_SHELL)) throw new Error(`${STATIC_SHELL} is missing: apt-get install busybox-static`);
  const staticRoot = layerRoot(
    templates,
    writeTestTemplate(templates, 'static-shell', { programs: [STATIC_SHELL], owners: isRoot ? 'native' : 'flattened' }).layers[0]!,
  );
  rmSync(join(staticRoot, 'usr/bin/sh'));
  symlinkSync('busybox', join(staticRoot, 'usr/bin/sh'));
}

const s = localServer({ prepare: writeTemplates });

describe('a sandbox on a root with only a shell', () => {
  it("runs commands, tasks and the file tools (the resident's own: no stat, find or cat)", async () => {
    const { sandbox_id } = await ok(s.client, 'create_sandbox', { template: 'shell-only', timeout: 300 });
    // Its resident agent runs on the agent runtime (the server's node, bound in), installed by that
    // node where the root has no mkdir, cat or mv.
    await waitFor(() => residentRecordOf(s.stateDir, sandbox_id)?.resident, 'the resident to run');
    expect(await ok(s.client, 'run_command', { sandbox_id, command: 'echo "hi $HOME"; command -v cat || echo no-cat' })).toMatchObject({
      exit_code: 0,
      stdout: 'hi /home/user\nno-cat\n',
    });
    const task = await ok(s.client, 'start_task', { sandbox_id, command: 'echo task-out; exit 3' });
    const done = await waitFor(async () => {
      const v = await ok(s.client, 'get_task', { sandbox_id, task_id: task.task_id, wait: 10 });
      return v.state === 'running' ? undefined : v;
    }, 'the task to end');
    expect(done).toMatchObject({ state: 'failed', exit_code: 3, stdout: 'task-out\n' });
    // The file tools are the resident's own operations: no stat, find or cat needed (without a
    // resident, the scripts name the program the root lacks: local/templates).
    await ok(s.client, 'write_file', { sandbox_id, path: 'notes/a.txt', content: 'x' });
    expect(await ok(s.client, 'read_file', { sandbox_id, path: 'notes/a.txt' })).toMatchObject({ content: 'x' });
    const listed = (await ok(s.client, 'list_files', { sandbox_id, path: 'notes' })).entries as { name: string }[];
    expect(listed.map((entry) => entry.name)).toEqual(['a.txt']);
    await ok(s.client, 'kill_sandbox', { sandbox_id });
  });
});

describe('a sandbox on a root with only a static shell', () => {
  it('runs commands and tasks with no loader or libc in the root, and writes a file', async () => {
    const { sandbox_id } = await ok(s.client, 'create_sandbox', { template: 'static-shell', timeout: 300 });
    await waitFor(() => residentRecordOf(s.stateDir, sandbox_id)?.resident, 'the resident to run');
    const probe = await ok(s.client, 'run_command', {
      sandbox_id,
      command: 'echo "hi $HOME"; ls /usr/lib /lib64 2>&1 | head -3; readlink /bin/sh',
    });
    expect(probe).toMatchObject({ exit_code: 0 });
    expect(probe.stdout).toMatch(/^hi \/home\/user\n/);
    expect(probe.stdout).toMatch(/busybox\n$/);
    expect(probe.stdout).not.toMatch(/libc\.so|ld-linux/);
    const task = await ok(s.client, 'start_task', { sandbox_id, command: 'echo task-out; exit 4' });
    const done = await waitFor(async () => {
      const v = await ok(s.client, 'get_task', { sandbox_id, task_id: task.task_id, wait: 10 });
      return v.state === 'running' ? undefined : v;
    }, 'the task to end');
    expect(done).toMatchObject({ state: 'failed', exit_code: 4, stdout: 'task-out\n' });
    await ok(s.client, 'write_file', { sandbox_id, path: 'notes/a.txt', content: 'kept\n' });
    expect(await ok(s.client, 'read_file', { sandbox_id, path: 'notes/a.txt' })).toMatchObject({ content: 'kept\n' });
    await ok(s.client, 'kill_sandbox', { sandbox_id });
  });
});
