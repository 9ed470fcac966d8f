// Every tool through a real MCP client over stdio, against
// real local sandboxes. Each test sets up what it needs: tests that only run things share one
// sandbox made in beforeAll and name it explicitly; tests about the session default use a
// session of their own.
import { createHash, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { OP_NAMES } from '../../shared/protocol.js';
import { localServers, ok, type StdioServer, toolError } from '../support/built-server.js';
import { waitFor } from '../support/wait.js';

const TOOL_NAMES = [
  'create_sandbox',
  'kill_sandbox',
  'list_sandboxes',
  'get_sandbox',
  'set_sandbox_timeout',
  'run_command',
  'run_code',
  'read_file',
  'write_file',
  'list_files',
  'upload_file',
  'download_file',
  'start_task',
  'get_task',
  'cancel_task',
  'send_task_input',
  // Beyond the seeds (DESIGN.md): issues 11 and 25.
  'expose_port',
  // The way out of a full process table (issue 20).
  'stop_processes',
  // Issue 19.
  'snapshot_sandbox',
  'workspace_changes',
];
const METADATA_FIELDS = ['cpu_count', 'disk_size_mb', 'end_at', 'memory_mb', 'region', 'sandbox_id', 'started_at', 'status', 'template'];
const SECRET = 'sk-live-' + randomBytes(12).toString('hex');

const SERVER_ENV = { MY_SERVICE_TOKEN: 'server-side-token-value' };

const servers = localServers();
let s: StdioServer;
/** Created in beforeAll with a secret-named and a plain env; tests address it by id and never destroy it. */
let shared: string;

beforeAll(async () => {
  // The server's own secret-named variable must be masked too.
  s = await servers.connect(SERVER_ENV);
  shared = (await ok(s.client, 'create_sandbox', { timeout: 600, envs: { API_SECRET_KEY: SECRET, PLAIN: 'visible' } })).sandbox_id;
});

async function sandboxCount(): Promise<number> {
  return (await ok(s.client, 'list_sandboxes', {})).sandboxes.length;
}

/** Runs `use` in a new server session (no default sandbox yet), then ends it. */
async function inFreshSession(use: (session: StdioServer) => Promise<void>): Promise<void> {
  const fresh = await servers.connect(SERVER_ENV);
  try {
    await use(fresh);
  } finally {
    await fresh.close();
  }
}

/** Polls get_task (bounded) until the task leaves `running`; returns the last view. */
async function finished(task: Record<string, any>): Promise<Record<string, any>> {
  let view: Record<string, any> = task;
  for (let i = 0; i < 20 && view.state === 'running'; i++) {
    view = await ok(s.client, 'get_task', { sandbox_id: task.sandbox_id, task_id: task.task_id, wait: 5 });
  }
  return view;
}

describe('the tool surface', () => {
  it("lists exactly the seeds' fifteen tools and the later ones, each with input and output schemas and annotations", async () => {
    const { tools } = await s.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
    for (const t of tools) {
      expect(t.inputSchema.type).toBe('object');
      expect(t.outputSchema?.type).toBe('object');
      expect(typeof t.annotations?.readOnlyHint).toBe('boolean');
    }
    expect(tools.find((t) => t.name === 'get_task')!.annotations!.readOnlyHint).toBe(true);
    expect(tools.find((t) => t.name === 'kill_sandbox')!.annotations!.destructiveHint).toBe(true);
    expect(OP_NAMES).toEqual(['hello', 'start', 'get', 'cancel', 'input', 'list', 'remove', 'workspace_changes', 'selftest']);
  });

  it('describes every input field, nested ones included, in tools/list', async () => {
    const { tools } = await s.client.listTools();
    const undescribed: string[] = [];
    const fields: string[] = [];
    // Every property at any depth: inside unions (anyOf/oneOf/allOf), array items and record values.
    const walk = (schema: unknown, at: string): void => {
      if (schema === null || typeof schema !== 'object') return;
      const node = schema as Record<string, unknown>;
      for (const [name, property] of Object.entries((node.properties ?? {}) as Record<string, Record<string, unknown>>)) {
        fields.push(`${at}.${name}`);
        if (typeof property.description !== 'string' || property.description.trim() === '') undescribed.push(`${at}.${name}`);
        walk(property, `${at}.${name}`);
      }
      for (const key of ['anyOf', 'oneOf', 'allOf'] as const) for (const branch of (node[key] ?? []) as unknown[]) walk(branch, at);
      walk(node.items, `${at}[]`);
      walk(node.additionalProperties, `${at}{}`);
    };
    for (const t of tools) walk(t.inputSchema, t.name);
    expect(undescribed).toEqual([]);
    // The walk reached nested fields too (network.allow_out), so an empty list means something.
    expect(fields).toContain('create_sandbox.network.allow_out');
    expect(fields.length).toBeGreaterThan(50);
    // The path rule is told wherever a path or working directory is taken.
    const property = (tool: string, name: string) =>
      (tools.find((t) => t.name === tool)!.inputSchema.properties as Record<string, { description: string }>)[name]!.description;
    for (const [tool, name] of [
      ['write_file', 'path'],
      ['download_file', 'path'],
      ['run_command', 'cwd'],
      ['run_code', 'cwd'],
      ['start_task', 'cwd'],
    ]) {
      expect(property(tool!, name!), `${tool}.${name}`).toContain('/tmp/a/../b is /tmp/b');
    }
    // A file's path is told not to end in /; a directory's (list_files) may.
    for (const tool of ['read_file', 'write_file', 'upload_file', 'download_file'])
      expect(property(tool, 'path'), tool).toContain('not ending in /');
    expect(property('list_files', 'path')).not.toContain('not ending in /');
  });

  it('tells the model the workflow in the initialize instructions', () => {
    const text = s.client.getInstructions() ?? '';
    expect(text).toMatch(/task_id/);
    expect(text).toMatch(/offset/);
    expect(text).toMatch(/kill_sandbox/);
  });

  it('get_sandbox with no default is a tool error and creates nothing', async () => {
    await inFreshSession(async (fresh) => {
      const before = await sandboxCount();
      const e = await toolError(fresh.client, 'get_sandbox', {});
      expect(e.category).toBe('invalid_argument');
      expect(e.suggestion).toMatch(/create_sandbox/);
      expect((await toolError(fresh.client, 'run_command', { command: 'true' })).code).toBe('no_default_sandbox');
      expect(await sandboxCount()).toBe(before);
    });
  });

  it('rejects bad input before any provider call, naming the field and never echoing the value', async () => {
    const before = await sandboxCount();
    const cases: [string, Record<string, unknown>, string, string?][] = [
      ['create_sandbox', { timeout: 60, surprise: 'VALUE_SURPRISE' }, 'surprise', 'VALUE_SURPRISE'],
      ['create_sandbox', { timeout: true }, 'timeout'],
      ['create_sandbox', { timeout: 1.5 }, 'timeout'],
      ['create_sandbox', { timeout: '60' }, 'timeout'],
      ['create_sandbox', { timeout: 86401 }, 'timeout'],
      ['create_sandbox', { cpu: 0 }, 'cpu'],
      ['create_sandbox', { envs: { GOOD: 'x', SK_LIVE_SECRETNAME: 7 } }, 'envs.<key>', 'SK_LIVE_SECRETNAME'],
      ['create_sandbox', { 'sk-live-SECRETKEYNAME': 1 }, '<key>', 'sk-live-SECRETKEYNAME'],
      ['list_sandboxes', { limit: 101 }, 'limit'],
      ['list_sandboxes', { offset: -1 }, 'offset'],
      ['get_sandbox', { sandbox_id: '' }, 'sandbox_id'],
      ['set_sandbox_timeout', { timeout: 0 }, 'timeout'],
      ['get_task', { sandbox_id: 'local:abc', task_id: 'NOT-A-TASK-ID-VALUE' }, 'task_id', 'NOT-A-TASK-ID-VALUE'],
      ['get_task', { sandbox_id: 'local:abc', task_id: '0'.repeat(32), limit: 65537 }, 'limit'],
      ['get_task', { sandbox_id: 'local:abc', task_id: '0'.repeat(32), wait: 31 }, 'wait'],
      ['start_task', { command: 'x'.repeat(65537) }, 'command'],
      ['start_task', { command: 'true', timeout: 3601 }, 'timeout'],
      ['run_command', { command: 'true', timeout: false }, 'timeout'],
      ['list_files', { path: '/', depth: 6 }, 'depth'],
      ['download_file', { path: '/x', length: 4 * 1024 * 1024 + 1 }, 'length'],
      // A NUL byte is refused by the input check, before the (missing) sandbox is looked up:
      // start_task used to start a task that failed at spawn, run_command and the file tools
      // to say only "The path contains a NUL byte." (or not_found here).
      ['start_task', { sandbox_id: 'local:doesnotexist', command: 'echo VALUE_NUL\0x' }, 'command', 'VALUE_NUL'],
      ['run_command', { sandbox_id: 'local:doesnotexist', command: 'echo VALUE_NUL\0x' }, 'command', 'VALUE_NUL'],
      ['run_command', { sandbox_id: 'local:doesnotexist', command: 'true', cwd: '/tmp/VALUE_NUL\0' }, 'cwd', 'VALUE_NUL'],
      ['read_file', { sandbox_id: 'local:doesnotexist', path: 'VALUE_NUL\0x' }, 'path', 'VALUE_NUL'],
    ];
    for (const [tool, args, field, secretValue] of cases) {
      const e = await toolError(s.client, tool, args);
      expect(e.category, `${tool} ${field}`).toBe('invalid_argument');
      expect(e.suggestion, `${tool} ${field}`).toContain(`\`${field}\``);
      if (secretValue) expect(e.text).not.toContain(secretValue);
      if (field !== 'command' || !String(args.command).includes('\0')) continue;
      expect(e.suggestion).toBe('field `command` must not contain a NUL byte');
    }
    // The encoded-request cap (JSON + base64 + quoting) applies before any provider contact:
    // 30000 three-byte characters fit the character limit but not 96 KiB once encoded.
    const huge = await toolError(s.client, 'start_task', { sandbox_id: 'local:doesnotexist', command: '€'.repeat(30000) });
    expect(huge.category).toBe('invalid_argument');
    expect(huge.suggestion).toContain('`command`');
    expect(await sandboxCount()).toBe(before);
  });

  it('creates a sandbox with exactly the nine metadata fields and makes it the default', async () => {
    await inFreshSession(async (fresh) => {
      const meta = await ok(fresh.client, 'create_sandbox', { timeout: 300 });
      expect(Object.keys(meta).sort()).toEqual(METADATA_FIELDS);
      expect(meta.template).toBe('base');
      const info = await ok(fresh.client, 'get_sandbox', {});
      expect(Object.keys(info).sort()).toEqual(METADATA_FIELDS);
      expect(info.sandbox_id).toBe(meta.sandbox_id);
      const listed = await ok(fresh.client, 'list_sandboxes', { status: 'running' });
      for (const item of listed.sandboxes) expect(Object.keys(item).sort()).toEqual(METADATA_FIELDS);
      expect(listed.sandboxes.map((m: { sandbox_id: string }) => m.sandbox_id)).toContain(meta.sandbox_id);
    });
  });

  it('set_sandbox_timeout moves end_at from now', async () => {
    const before = await ok(s.client, 'get_sandbox', { sandbox_id: shared });
    const r = await ok(s.client, 'set_sandbox_timeout', { sandbox_id: shared, timeout: 7200 });
    expect(r).toEqual({ success: true, sandbox_id: shared, timeout: 7200 });
    const after = await ok(s.client, 'get_sandbox', { sandbox_id: shared });
    const remainingS = (Date.parse(after.end_at) - Date.now()) / 1000;
    expect(remainingS).toBeGreaterThan(3600);
    expect(Date.parse(after.end_at)).toBeGreaterThan(Date.parse(before.end_at));
  });

  it('masks secrets from create envs and from the server environment in run_command and task output', async () => {
    const run = await ok(s.client, 'run_command', {
      sandbox_id: shared,
      command: 'echo "$API_SECRET_KEY $PLAIN"; echo server-side-token-value >&2',
    });
    expect(run.exit_code).toBe(0);
    expect(run.stdout).not.toContain(SECRET);
    expect(run.stdout).toContain('[MASKED] visible');
    expect(run.stderr).toBe('[MASKED]\n');
    const task = await ok(s.client, 'start_task', {
      sandbox_id: shared,
      command: 'printf "%s" "$API_SECRET_KEY"; echo; echo server-side-token-value',
    });
    const view = await finished(task);
    expect(view.state).toBe('succeeded');
    expect(view.stdout).toBe('[MASKED]\n[MASKED]\n');
  });

  it('run_command reports exit codes, cwd and per-call envs, and caps output with explicit truncation', async () => {
    const r = await ok(s.client, 'run_command', {
      sandbox_id: shared,
      command: 'pwd; echo "$X"; exit 7',
      cwd: '/tmp',
      envs: { X: 'per-call' },
    });
    expect(r.exit_code).toBe(7);
    expect(r.stdout).toBe('/tmp\nper-call\n');
    const big = await ok(s.client, 'run_command', { sandbox_id: shared, command: 'head -c 200000 /dev/zero | tr "\\0" a; echo END' });
    expect(big.stdout_truncated).toBe(true);
    expect(big.stdout.startsWith('a'.repeat(32768))).toBe(true);
    expect(big.stdout.endsWith('aEND\n')).toBe(true);
    expect(big.stdout).toContain('output truncated');
    expect(Buffer.byteLength(big.stdout)).toBeLessThan(64 * 1024 + 200);
  });

  it('kills the process group of a run_command whose call the client cancelled', async () => {
    const count = async () =>
      (await ok(s.client, 'run_command', { sandbox_id: shared, command: "pgrep -c -xf 'sleep 100[34]' || true" })).stdout.trim();
    const abort = new AbortController();
    const call = s.client.callTool(
      { name: 'run_command', arguments: { sandbox_id: shared, command: 'sleep 1003 & sleep 1004; wait', timeout: 600 } },
      undefined,
      { signal: abort.signal },
    );
    await waitFor(async () => (await count()) === '2', 'both sleeps to run');
    abort.abort();
    await expect(call).rejects.toThrow();
    await waitFor(async () => (await count()) === '0', 'the cancelled command to be killed');
  });

  it('run_code runs python, javascript and bash', async () => {
    expect((await ok(s.client, 'run_code', { sandbox_id: shared, code: 'print(6*7)' })).stdout).toBe('42\n');
    expect((await ok(s.client, 'run_code', { sandbox_id: shared, code: 'console.log([1,2].length)', language: 'javascript' })).stdout).toBe(
      '2\n',
    );
    expect((await ok(s.client, 'run_code', { sandbox_id: shared, code: 'echo $((2+3))', language: 'bash' })).stdout).toBe('5\n');
  });

  it('writes, reads and lists text files', async () => {
    expect(await ok(s.client, 'write_file', { sandbox_id: shared, path: 'notes/a/b.txt', content: 'héllo\n' })).toEqual({
      path: 'notes/a/b.txt',
      bytes_written: 7,
    });
    const read = await ok(s.client, 'read_file', { sandbox_id: shared, path: '/home/user/notes/a/b.txt' });
    expect(read).toEqual({ path: '/home/user/notes/a/b.txt', content: 'héllo\n', size: 7, truncated: false });
    const listed = await ok(s.client, 'list_files', { sandbox_id: shared, path: 'notes', depth: 2 });
    const names = listed.entries.map((e: { name: string; type: string }) => `${e.type}:${e.name}`).sort();
    expect(names).toEqual(['directory:a', 'file:b.txt']);
    expect(listed.truncated).toBe(false);
    expect((await toolError(s.client, 'read_file', { sandbox_id: shared, path: '/nonexistent/file' })).category).toBe('not_found');
  });

  it('refuses a file path ending in /, . or .. (it names a directory) naming `path`, writing nothing; list_files still takes one', async () => {
    await ok(s.client, 'write_file', { sandbox_id: shared, path: 'slash/f.txt', content: 'kept\n' });
    const refused: [string, Record<string, unknown>][] = [
      ['write_file', { path: 'dir/', content: 'x' }],
      ['write_file', { path: '/home/user/newdir/', content: 'x' }],
      ['write_file', { path: '~/', content: 'x' }],
      ['write_file', { path: 'dotdir/.', content: 'x' }],
      ['write_file', { path: 'dotdir/x/..', content: 'x' }],
      ['write_file', { path: '.', content: 'x' }],
      ['upload_file', { path: 'updir/', data_base64: 'eA==' }],
      ['upload_file', { path: 'updir/', data_base64: 'eA==', append: true }],
      ['read_file', { path: 'slash/f.txt/' }],
      ['download_file', { path: '/home/user/slash/f.txt/' }],
    ];
    for (const [tool, args] of refused) {
      const e = await toolError(s.client, tool, { sandbox_id: shared, ...args });
      expect(e.category, `${tool} ${String(args.path)}`).toBe('invalid_argument');
      expect(e.suggestion).toBe("field `path` names a directory (it ends in /, . or ..): give the file's path");
      // Never echoed (`.` alone would be found in any text).
      if (String(args.path).length > 1) expect(e.text).not.toContain(String(args.path));
    }
    // Nothing was written: before the check, `dir/` wrote a regular file named `dir`.
    const home = (await ok(s.client, 'run_command', { sandbox_id: shared, command: 'ls -a ~' })).stdout.split('\n');
    expect(home).toContain('slash');
    for (const name of ['dir', 'newdir', 'updir', 'dotdir']) expect(home).not.toContain(name);
    expect((await ok(s.client, 'read_file', { sandbox_id: shared, path: 'slash/f.txt' })).content).toBe('kept\n');

    for (const path of ['slash/', '/home/user/slash/', '~/slash/']) {
      const listed = await ok(s.client, 'list_files', { sandbox_id: shared, path });
      expect(
        listed.entries.map((e: { name: string }) => e.name),
        path,
      ).toEqual(['f.txt']);
    }
  });

  it('reads `~` and `~/…` as the home in file paths, run_command and start_task working directories', async () => {
    await ok(s.client, 'write_file', { sandbox_id: shared, path: '~/tilde/t.txt', content: 'tilde\n' });
    expect((await ok(s.client, 'read_file', { sandbox_id: shared, path: '/home/user/tilde/t.txt' })).content).toBe('tilde\n');
    expect((await ok(s.client, 'read_file', { sandbox_id: shared, path: 'tilde/t.txt' })).content).toBe('tilde\n');
    expect((await ok(s.client, 'run_command', { sandbox_id: shared, command: 'pwd', cwd: '~/tilde' })).stdout).toBe('/home/user/tilde\n');
    expect((await ok(s.client, 'run_command', { sandbox_id: shared, command: 'pwd', cwd: '~' })).stdout).toBe('/home/user\n');
    const task = await ok(s.client, 'start_task', { sandbox_id: shared, command: 'pwd; cat t.txt', cwd: '~/tilde' });
    const view = await finished(task);
    expect([view.state, view.stdout]).toEqual(['succeeded', '/home/user/tilde\ntilde\n']);
  });

  it('resolves every cwd by the path rule: start_task, run_command and run_code, direct and promoted by background_after', async () => {
    const sb = (await ok(s.client, 'create_sandbox', { timeout: 600 })).sandbox_id as string;
    try {
      // ~/sub and /tmp/b exist; ~/nope and /tmp/a do not: `..` must be normalised away before
      // anything changes directory (the kernel would refuse a path through a missing directory).
      await ok(s.client, 'run_command', { sandbox_id: sb, command: 'mkdir -p ~/sub /tmp/b && rm -rf ~/nope /tmp/a' });
      const cases = [
        ['~/nope/..', '/home/user'],
        ['sub', '/home/user/sub'],
        ['/tmp/a/../b', '/tmp/b'],
      ] as const;
      const pythonPwd = 'import os\nprint(os.getcwd())';
      for (const [cwd, expected] of cases) {
        const task = await ok(s.client, 'start_task', { sandbox_id: sb, command: 'pwd', cwd });
        expect(await finished(task), `start_task ${cwd}`).toMatchObject({ state: 'succeeded', stdout: `${expected}\n` });
        for (const backgroundAfter of [undefined, 30]) {
          const promoted = backgroundAfter === undefined ? {} : { background_after: backgroundAfter };
          const how = backgroundAfter === undefined ? 'direct' : 'promotable';
          expect(
            await ok(s.client, 'run_command', { sandbox_id: sb, command: 'pwd', cwd, ...promoted }),
            `run_command ${how} ${cwd}`,
          ).toMatchObject({
            exit_code: 0,
            stdout: `${expected}\n`,
          });
          expect(
            await ok(s.client, 'run_code', { sandbox_id: sb, code: pythonPwd, cwd, ...promoted }),
            `run_code ${how} ${cwd}`,
          ).toMatchObject({
            exit_code: 0,
            stdout: `${expected}\n`,
          });
        }
      }
      // A working directory that does not exist is refused, and run_code leaves no temp file behind.
      expect((await toolError(s.client, 'run_code', { sandbox_id: sb, code: pythonPwd, cwd: '/tmp/a' })).category).toBe('invalid_argument');
      expect((await ok(s.client, 'run_command', { sandbox_id: sb, command: 'ls /tmp | grep -c sandbox-mcp-code || true' })).stdout).toBe(
        '0\n',
      );
    } finally {
      await ok(s.client, 'kill_sandbox', { sandbox_id: sb });
    }
  });

  it('run_code removes its temp file even when the timeout kills it', async () => {
    const r = await ok(s.client, 'run_code', {
      sandbox_id: shared,
      code: 'import time\nprint("started", flush=True)\ntime.sleep(30)',
      // The timeout counts from the host's spawn (nsenter, the sandbox's shell, python's start-up):
      // on a loaded machine that takes a good part of a second before "started" is printed.
      timeout: 3,
    });
    expect(r.timed_out).toBe(true);
    expect(r.stdout).toBe('started\n');
    const left = await ok(s.client, 'run_command', { sandbox_id: shared, command: 'ls /tmp | grep -c sandbox-mcp-code || true' });
    expect(left.stdout.trim()).toBe('0');
  });

  it('refuses binary files in read_file, pointing to download_file', async () => {
    await ok(s.client, 'upload_file', {
      sandbox_id: shared,
      path: 'bin.dat',
      data_base64: Buffer.from([0x41, 0, 0x42]).toString('base64'),
    });
    const e = await toolError(s.client, 'read_file', { sandbox_id: shared, path: 'bin.dat' });
    expect(e).toMatchObject({ category: 'invalid_argument', code: 'binary_file' });
    expect(e.suggestion).toContain('download_file');
  });

  it('round-trips a binary file of several MiB in chunks, sha256 checked', async () => {
    const data = randomBytes(5 * 1024 * 1024 + 123);
    const chunk = 2 * 1024 * 1024;
    let last: Record<string, any> = {};
    for (let off = 0; off < data.length; off += chunk) {
      const part = data.subarray(off, off + chunk);
      last = await ok(s.client, 'upload_file', {
        sandbox_id: shared,
        path: 'blob.bin',
        data_base64: part.toString('base64'),
        append: off > 0,
      });
      expect(last.sha256).toBe(createHash('sha256').update(part).digest('hex'));
      expect(last.size).toBe(off + part.length);
    }
    const fullHash = createHash('sha256').update(data).digest('hex');
    expect(last.size).toBe(data.length);
    const inSandbox = await ok(s.client, 'run_command', { sandbox_id: shared, command: 'sha256sum < blob.bin' });
    expect(inSandbox.stdout.slice(0, 64)).toBe(fullHash);

    const parts: Buffer[] = [];
    let offset = 0;
    for (;;) {
      const page = await ok(s.client, 'download_file', { sandbox_id: shared, path: 'blob.bin', offset, length: 3 * 1024 * 1024 });
      const bytes = Buffer.from(page.data_base64, 'base64');
      expect(page.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
      expect(page.size).toBe(data.length);
      parts.push(bytes);
      offset += page.bytes;
      if (page.eof) break;
    }
    expect(createHash('sha256').update(Buffer.concat(parts)).digest('hex')).toBe(fullHash);
    expect((await toolError(s.client, 'upload_file', { sandbox_id: shared, path: 'x', data_base64: 'not base64!' })).suggestion).toContain(
      '`data_base64`',
    );
  });

  it('returns images from download_file as an image content block too', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001000000010806000000', 'hex');
    await ok(s.client, 'upload_file', { sandbox_id: shared, path: 'pic.png', data_base64: png.toString('base64') });
    const r = await s.client.callTool({ name: 'download_file', arguments: { sandbox_id: shared, path: 'pic.png' } });
    const image = (r.content as { type: string; mimeType?: string; data?: string }[]).find((c) => c.type === 'image');
    expect(image?.mimeType).toBe('image/png');
    expect(image?.data).toBe(png.toString('base64'));
  });

  it('paginates list_sandboxes by offset', async () => {
    await ok(s.client, 'create_sandbox', {});
    await ok(s.client, 'create_sandbox', {});
    const all = await ok(s.client, 'list_sandboxes', {});
    expect(all.sandboxes.length).toBeGreaterThanOrEqual(3);
    const first = await ok(s.client, 'list_sandboxes', { limit: 2, offset: 0 });
    const second = await ok(s.client, 'list_sandboxes', { limit: 2, offset: 2 });
    expect(first).toMatchObject({ limit: 2, offset: 0 });
    expect(first.sandboxes).toHaveLength(2);
    const ids = [...first.sandboxes, ...second.sandboxes].map((m: { sandbox_id: string }) => m.sandbox_id);
    expect(new Set(ids).size).toBe(ids.length);
    // Pages are consecutive slices of the same stable order.
    expect(ids).toEqual(all.sandboxes.slice(0, ids.length).map((m: { sandbox_id: string }) => m.sandbox_id));
  });

  it('logs to stderr without secrets, argument values or output', async () => {
    await ok(s.client, 'run_command', {
      sandbox_id: shared,
      command: 'echo "$API_SECRET_KEY $LOGGED_VALUE"; echo server-side-token-value',
      envs: { LOGGED_VALUE: 'per-call-value' },
    });
    await toolError(s.client, 'get_task', { sandbox_id: shared, task_id: 'NOT-A-TASK-ID-VALUE' });
    const log = s.stderr();
    expect(log).toContain('"tool":"run_command"');
    expect(log).not.toContain(SECRET);
    expect(log).not.toContain('server-side-token-value');
    expect(log).not.toContain('per-call-value');
    expect(log).not.toContain('NOT-A-TASK-ID-VALUE');
    for (const line of log.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  });

  it('kill_sandbox clears the default', async () => {
    const meta = await ok(s.client, 'create_sandbox', {});
    expect(await ok(s.client, 'kill_sandbox', {})).toEqual({ success: true, sandbox_id: meta.sandbox_id, destroyed: true });
    expect((await toolError(s.client, 'get_sandbox', {})).code).toBe('no_default_sandbox');
    expect((await toolError(s.client, 'get_sandbox', { sandbox_id: meta.sandbox_id })).category).toBe('not_found');
  });

  it('kill_sandbox is idempotent, as annotated: a sandbox already gone (or never made) is a success with destroyed: false', async () => {
    const { tools } = await s.client.listTools();
    expect(tools.find((t) => t.name === 'kill_sandbox')!.annotations!.idempotentHint).toBe(true);
    const meta = await ok(s.client, 'create_sandbox', {});
    expect(await ok(s.client, 'kill_sandbox', { sandbox_id: meta.sandbox_id })).toMatchObject({ destroyed: true });
    // A retry (say, after a lost answer) and an id that never existed answer alike.
    expect(await ok(s.client, 'kill_sandbox', { sandbox_id: meta.sandbox_id })).toEqual({
      success: true,
      sandbox_id: meta.sandbox_id,
      destroyed: false,
    });
    expect(await ok(s.client, 'kill_sandbox', { sandbox_id: 'local:zzzzzzzzzzzz' })).toEqual({
      success: true,
      sandbox_id: 'local:zzzzzzzzzzzz',
      destroyed: false,
    });
    // Not every failure is "already gone": a malformed id is still an error.
    expect((await toolError(s.client, 'kill_sandbox', { sandbox_id: 'local:../../etc' })).category).toBe('invalid_argument');
  });
});
