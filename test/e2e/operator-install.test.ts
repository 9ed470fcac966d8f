// The operator commands on installs that differ from the usual: node-pty that cannot load (only
// `shell` fails, with a clear error; the server and the other commands work), and a sandbox whose
// agent predates the `list` op (ls says so for that sandbox and lists the others). Each install
// is a copy of the BUILT dist/ beside links to this checkout's node_modules.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadAgentBundle } from '../../host/providers/agent-bundle.js';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { AGENT_WITHOUT_LIST, ListingSchema } from '../../host/tasks/listing.js';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { ALL_TOOLS } from '../../host/mcp/tool-list.js';
import type { Provider } from '../../host/providers/provider.js';
import { PROTOCOL_VERSION } from '../../shared/protocol.js';
import { serverEnv } from '../support/built-server.js';
import { REPO } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { destroyStateDir, tempStateDir } from '../support/state-dir.js';
import { waitFor } from '../support/wait.js';

const stateDir = tempStateDir();
const installs: string[] = [];
let provider: Provider;

/** A copy of the built install; `nodePty: 'broken'` puts a node-pty there that fails to load as a missing binding does. */
function install(opts: { nodePty: 'linked' | 'broken'; agentSource?: string }): string {
  const root = mkdtempSync(join(tmpdir(), 'sandbox-mcp-install-'));
  installs.push(root);
  cpSync(join(REPO, 'dist'), join(root, 'dist'), { recursive: true });
  mkdirSync(join(root, 'node_modules'));
  for (const name of readdirSync(join(REPO, 'node_modules'))) {
    if (name === '@lydell' && opts.nodePty === 'broken') continue;
    symlinkSync(join(REPO, 'node_modules', name), join(root, 'node_modules', name));
  }
  if (opts.nodePty === 'broken') {
    const dir = join(root, 'node_modules', '@lydell', 'node-pty');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: '@lydell/node-pty', version: '1.1.0', main: 'index.js' }));
    writeFileSync(join(dir, 'index.js'), "throw new Error('Failed to load native module: pty.node');\n");
  }
  if (opts.agentSource !== undefined) {
    writeFileSync(join(root, 'dist', 'agent.cjs'), opts.agentSource);
    const manifest = JSON.parse(readFileSync(join(root, 'dist', 'agent-manifest.json'), 'utf8'));
    writeFileSync(join(root, 'dist', 'agent-manifest.json'), JSON.stringify({ ...manifest, file_name: 'agent-0.0.9-predates-list.cjs' }));
  }
  return join(root, 'dist', 'host.js');
}

function run(hostJs: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [hostJs, ...args], { env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }) }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

beforeAll(async () => {
  requireSandboxes();
  provider = createLocalProvider({ stateDir });
});
afterAll(async () => {
  await provider?.close();
  await destroyStateDir(stateDir);
  for (const root of installs) rmSync(root, { recursive: true, force: true });
});

describe('an install whose node-pty cannot load', () => {
  it('serves MCP and runs the other commands; only shell fails, saying what to install', async () => {
    const hostJs = install({ nodePty: 'broken' });
    const sandboxId = (await provider.create({ timeoutS: 600 })).sandbox_id;

    expect((await run(hostJs, ['--help'])).code).toBe(0);
    const ls = await run(hostJs, ['ls']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain(`local:${sandboxId}`);

    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [hostJs],
      env: serverEnv({ SANDBOX_MCP_STATE_DIR: stateDir }),
      stderr: 'pipe',
    });
    const client = new Client({ name: 'no-pty', version: '1' });
    await client.connect(transport);
    try {
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(ALL_TOOLS.map((t) => t.name).sort());
      const r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: `local:${sandboxId}`, command: 'echo works' } });
      expect(r.structuredContent).toMatchObject({ exit_code: 0, stdout: 'works\n' });
    } finally {
      await client.close();
    }

    const shell = await run(hostJs, ['shell', sandboxId]);
    expect(shell.code).toBe(1);
    expect(shell.stderr).toMatch(/^sandbox-mcp: unsupported: The shell needs the native module node-pty/);
    expect(shell.stderr).toContain('with its optional dependencies');
    // The loader's own message (a host path, a module's text) never reaches the person.
    expect(shell.stderr).not.toContain('pty.node');
  });
});

describe('a sandbox whose agent predates the list op', () => {
  it('ls says so on that sandbox and still lists the others with their tasks', async () => {
    // This install's agent answers as protocol 1.0 did (no `list`, no `ops` in hello) where the
    // sandbox holds the file `old-agent`, and is the real agent everywhere else.
    const real = readFileSync(join(REPO, 'dist', 'agent.cjs'), 'utf8');
    const older = `const fs = require('node:fs');
if (process.argv[2] === 'call' && fs.existsSync(require('node:path').join(process.env.HOME, 'old-agent'))) {
  const req = JSON.parse(Buffer.from(process.argv[3], 'base64url').toString('utf8'));
  const answer = req.op === 'hello'
    ? { protocol: 1, ok: true, result: { agent_version: '0.0.9', protocol: 1, state_dir: '/home/user/.local/state/sandbox-agent', max_tasks: 128, stream_cap_bytes: 1048576 } }
    : { protocol: 1, ok: false, error: { code: 'invalid_request', message: 'field \`op\` is not one of the allowed values' } };
  process.stdout.write(JSON.stringify(answer) + '\\n');
} else {
  (function () {
${real}
  })();
}
`;
    const hostJs = install({ nodePty: 'linked', agentSource: older });
    // Made without a resident agent, as sandboxes of older servers are: its agent calls are the per-call agent's.
    const withoutResident = createLocalProvider({ stateDir, residentAgent: false });
    const oldSandbox = (await withoutResident.create({ timeoutS: 600 })).sandbox_id;
    await withoutResident.close();
    await provider.writeFile(oldSandbox, 'old-agent', Buffer.alloc(0));
    const current = (await provider.create({ timeoutS: 600 })).sandbox_id;
    const agent = new AgentClient(loadAgentBundle(join(REPO, 'dist')));
    const taskId = 'ab'.repeat(16);
    await agent.call(
      provider,
      current,
      { protocol: PROTOCOL_VERSION, op: 'start', task_id: taskId, command: 'sleep 300' },
      { timeoutS: 60 },
    );
    // start may answer before the supervisor's first status write (the task would list as unknown).
    await waitFor(
      async () =>
        (await agent.call(provider, current, { protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId }, { timeoutS: 60 })).state ===
        'running',
      'the task to run',
    );

    const json = await run(hostJs, ['ls', '--json']);
    expect(json.code).toBe(0);
    const listing = ListingSchema.parse(JSON.parse(json.stdout));
    const old = listing.sandboxes.find((s) => s.sandbox_id === `local:${oldSandbox}`)!;
    expect(old).toMatchObject({ tasks: null, tasks_error: { category: 'unsupported', code: AGENT_WITHOUT_LIST } });
    const cur = listing.sandboxes.find((s) => s.sandbox_id === `local:${current}`)!;
    expect(cur.tasks_error).toBeNull();
    expect(cur.tasks).toContainEqual(expect.objectContaining({ task_id: taskId, state: 'running' }));

    const people = await run(hostJs, ['ls']);
    const lines = people.stdout.split('\n');
    const at = lines.findIndex((l) => l.startsWith(`local:${oldSandbox} `));
    expect(lines[at + 1]).toBe(
      "    tasks unavailable: This sandbox's task agent predates task listing (protocol 1.0); its tasks can still be read with `logs`.",
    );
    expect(people.stdout).toContain(taskId);
  });
});
