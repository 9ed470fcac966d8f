// Benchmarks of the MCP tools over stdio with the SDK client (`npm run bench`). Measured once at
// load, interleaved in one run so the shared machine's load skews every side alike, and printed
// as medians, p95 and ratios against a bare provider exec of `node -e 0` in the same sandbox:
//   run_command `true` (and with background_after: the supervised path), start_task `true`,
//   get_task — targets: get_task <= 2x, start_task <= 3x.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, bench, describe } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HOST = join(ROOT, 'dist/host.js');
if (!existsSync(HOST)) execFileSync(process.execPath, [join(ROOT, 'build/build.mjs')]);

const ROUNDS = 40;
const stateDir = mkdtempSync(join(tmpdir(), 'mcp-bench-'));
// A clean environment: this machine's NODE_EXTRA_CA_CERTS alone adds ~40 ms to a node start.
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', SANDBOX_MCP_STATE_DIR: stateDir };

const client = new Client({ name: 'bench', version: '1' });
await client.connect(new StdioClientTransport({ command: process.execPath, args: [HOST], env, stderr: 'ignore' }));
const provider = createLocalProvider({ stateDir });

async function call(name: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name} failed`);
  return r.structuredContent as Record<string, any>;
}

const sandbox = await call('create_sandbox', { timeout: 900 });
const rawId = String(sandbox.sandbox_id).replace(/^local:/, '');
const task = await call('start_task', { command: 'true' }); // also pushes the agent
const ops: Record<string, () => Promise<unknown>> = {
  'provider exec node -e 0': () => provider.exec(rawId, 'node -e 0', { timeoutS: 30 }),
  'run_command true': () => call('run_command', { command: 'true' }),
  // Supervised (promotable) but finishing at once: start, then remove of the finished task.
  'run_command true bg_after': () => call('run_command', { command: 'true', background_after: 30 }),
  'start_task true': () => call('start_task', { command: 'true' }),
  get_task: () => call('get_task', { sandbox_id: sandbox.sandbox_id, task_id: task.task_id }),
};
// start_task writes a task directory each time: stay under the 128-task cap.
const samples: Record<string, number[]> = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
for (let round = 0; round < ROUNDS + 3; round++) {
  for (const [name, op] of Object.entries(ops)) {
    const t = performance.now();
    await op();
    if (round >= 3) samples[name]!.push(performance.now() - t);
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))]!;
}
const baseline = pct(samples['provider exec node -e 0']!, 0.5);
process.stderr.write(`[mcp bench] ${ROUNDS} interleaved rounds, stdio, local provider\n`);
for (const [name, xs] of Object.entries(samples)) {
  const med = pct(xs, 0.5);
  process.stderr.write(
    `[mcp bench] ${name.padEnd(26)} median ${med.toFixed(1).padStart(6)} ms  p95 ${pct(xs, 0.95).toFixed(1).padStart(6)} ms  ratio ${(med / baseline).toFixed(2)}x\n`,
  );
}

afterAll(async () => {
  await call('kill_sandbox', {});
  await client.close();
  await provider.close();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('MCP over stdio vs a bare provider exec (vitest repeats the headline pair)', () => {
  bench('provider exec node -e 0', async () => void (await ops['provider exec node -e 0']!()), { time: 2000, iterations: 20 });
  bench('get_task', async () => void (await ops.get_task!()), { time: 2000, iterations: 20 });
});
