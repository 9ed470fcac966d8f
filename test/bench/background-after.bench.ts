// What the server option --background-after costs every run_command (`npm run bench`): two
// servers side by side, one plain and one started with `--background-after 50`, each with its own
// sandbox, run `true` in interleaved rounds (so the shared machine's load skews both alike).
// Printed as medians, p95 and the ratio of the two; a bare provider exec of `node -e 0` in the
// same rounds tells how many node start-ups' worth the difference is on this machine's load.
// SANDBOX_MCP_BENCH_BASELINE=<a built checkout of another revision> adds that revision's plain
// server to the rounds (its own state directory), to compare the fast path across revisions.
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
const WARMUP = 3;
const stateDir = mkdtempSync(join(tmpdir(), 'bg-after-bench-'));
// A clean environment: this machine's NODE_EXTRA_CA_CERTS alone adds ~40 ms to a node start.
const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', SANDBOX_MCP_STATE_DIR: stateDir };

async function connect(args: string[], host = HOST, serverEnv: Record<string, string> = env): Promise<Client> {
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [host, ...args], env: serverEnv, stderr: 'ignore' }));
  return client;
}

const baselineDir = process.env.SANDBOX_MCP_BENCH_BASELINE;
const baselineStateDir = mkdtempSync(join(tmpdir(), 'bg-after-bench-baseline-'));
const BASELINE = 'run_command true (baseline revision, plain)';

async function call(client: Client, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name} failed`);
  return r.structuredContent as Record<string, unknown>;
}

const servers: Record<string, Client> = {
  'run_command true (plain server)': await connect([]),
  'run_command true (--background-after 50)': await connect(['--background-after', '50']),
  ...(baselineDir
    ? { [BASELINE]: await connect([], join(baselineDir, 'dist/host.js'), { ...env, SANDBOX_MCP_STATE_DIR: baselineStateDir }) }
    : {}),
};
const sandboxIds: string[] = [];
for (const client of Object.values(servers)) sandboxIds.push(String((await call(client, 'create_sandbox', { timeout: 900 })).sandbox_id));
const provider = createLocalProvider({ stateDir });
const NODE_START = 'provider exec node -e 0';
const ops: Record<string, () => Promise<unknown>> = {
  ...Object.fromEntries(Object.entries(servers).map(([name, client]) => [name, () => call(client, 'run_command', { command: 'true' })])),
  [NODE_START]: () => provider.exec(sandboxIds[0]!.replace(/^local:/, ''), 'node -e 0', { timeoutS: 30 }),
};

const samples: Record<string, number[]> = Object.fromEntries(Object.keys(ops).map((k) => [k, []]));
for (let round = 0; round < ROUNDS + WARMUP; round++) {
  for (const [name, op] of Object.entries(ops)) {
    const t = performance.now();
    await op();
    if (round >= WARMUP) samples[name]!.push(performance.now() - t);
  }
}

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))]!;
}
const [plain, optioned] = Object.values(samples).map((xs) => pct(xs, 0.5)) as [number, number];
const nodeStart = pct(samples[NODE_START]!, 0.5);
process.stderr.write(`[background-after bench] ${ROUNDS} interleaved rounds, stdio, local provider\n`);
for (const [name, xs] of Object.entries(samples)) {
  process.stderr.write(
    `[background-after bench] ${name.padEnd(42)} median ${pct(xs, 0.5).toFixed(1).padStart(6)} ms  p95 ${pct(xs, 0.95).toFixed(1).padStart(6)} ms\n`,
  );
}
process.stderr.write(
  `[background-after bench] the option costs ${(optioned - plain).toFixed(1)} ms per call: ${(optioned / plain).toFixed(1)}x, ` +
    `${((optioned - plain) / nodeStart).toFixed(1)} node start-ups' worth\n`,
);
if (baselineDir) {
  const base = pct(samples[BASELINE]!, 0.5);
  process.stderr.write(`[background-after bench] the fast path against the baseline revision's: ${(plain / base).toFixed(2)}x\n`);
}

afterAll(async () => {
  for (const client of Object.values(servers)) {
    await call(client, 'kill_sandbox', {});
    await client.close();
  }
  await provider.close();
  rmSync(stateDir, { recursive: true, force: true });
  rmSync(baselineStateDir, { recursive: true, force: true });
});

describe('run_command true on a plain server vs one with --background-after (vitest repeats the pair)', () => {
  for (const [name, client] of Object.entries(servers)) {
    bench(name, async () => void (await call(client, 'run_command', { command: 'true' })), { time: 2000, iterations: 10 });
  }
});
