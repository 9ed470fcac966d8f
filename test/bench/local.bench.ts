// Benchmarks of the local provider (`npm run bench`). Besides vitest's tables, each block prints
// its headline figure: exec overhead (absolute and ratio, in one run), create+kill latency (with
// and without an egress allow-list), the egress proxy's throughput against a direct fetch, and
// memory per idle sandbox with 20 concurrent sandboxes each running a task.
// SANDBOX_MCP_BENCH_BASELINE=<a built checkout of another revision> adds that revision's local
// provider, interleaved with this one in the same run, to the exec and create+kill figures (e.g.
// `git archive main | tar -x -C /tmp/base`, link node_modules, `node build/build.mjs` there).
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { bench, describe } from 'vitest';
import { createLocalProvider } from '../../host/providers/local/local-provider.js';
import { signalIfAlive } from '../../host/providers/local/system/proc.js';
import { readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import type { Provider } from '../../host/providers/provider.js';
import { KEEPER_SCRIPT } from '../support/paths.js';
import { requireSandboxes } from '../support/prerequisites.js';
import { tempStateDir } from '../support/state-dir.js';
import { median } from '../support/measure.js';

requireSandboxes();
const stateDir = tempStateDir();
// 20 concurrent sandboxes below: above the default maximum of live sandboxes.
const provider: Provider = createLocalProvider({ stateDir: stateDir, keeperScript: KEEPER_SCRIPT, limits: { maxSandboxes: 32 } });
const baselineDir = process.env.SANDBOX_MCP_BENCH_BASELINE;
const baselineStateDir = tempStateDir();
const baseline: Provider | null = baselineDir
  ? (
      (await import(join(baselineDir, 'host/providers/local/local-provider.ts'))) as { createLocalProvider: typeof createLocalProvider }
    ).createLocalProvider({
      stateDir: baselineStateDir,
      // A checkout from before the keeper became CommonJS has dist/keeper.js.
      keeperScript: join(baselineDir, existsSync(join(baselineDir, 'dist/keeper.cjs')) ? 'dist/keeper.cjs' : 'dist/keeper.js'),
    })
  : null;

function spawnTrue(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('true', [], { stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: '/usr/bin:/bin' } });
    child.on('error', reject);
    child.on('close', () => resolve());
  });
}

async function sample(n: number, fn: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    out.push(performance.now() - t);
  }
  return out;
}

function rssKb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function pssKb(pid: number): number {
  try {
    const m = /Pss:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Printed outside vitest's console capture, so the figures show in `npm run bench`. */
function report(line: string): void {
  process.stderr.write(`[local bench] ${line}\n`);
}

// Headline figures, measured once at load (vitest runs no hooks in benchmark mode).
let execId = '';
let baselineExecId = '';
// No async teardown either: when the worker ends, tell the remaining keeper to end its sandbox now.
function releaseAll(): void {
  if (execId) {
    const rec = readKeeperRecord(`${stateDir}/local/${execId}`);
    if (rec) signalIfAlive(rec.keeper, 'SIGTERM');
  }
  if (baselineExecId) {
    const rec = readKeeperRecord(`${baselineStateDir}/local/${baselineExecId}`);
    if (rec) signalIfAlive(rec.keeper, 'SIGTERM');
  }
  rmSync(stateDir, { recursive: true, force: true });
  rmSync(baselineStateDir, { recursive: true, force: true });
}
// vitest ends bench workers with SIGTERM (no 'exit' event otherwise).
process.once('exit', releaseAll);
process.once('SIGTERM', () => {
  releaseAll();
  process.exit(0);
});
execId = (await provider.create({ timeoutS: 300 })).sandbox_id;
if (baseline) baselineExecId = (await baseline.create({ timeoutS: 300 })).sandbox_id;
// Interleaved in one run, so machine load skews every side alike.
const direct: number[] = [];
const viaProvider: number[] = [];
const viaBaseline: number[] = [];
for (let i = 0; i < 10; i++) {
  direct.push(...(await sample(20, spawnTrue)));
  viaProvider.push(...(await sample(20, () => provider.exec(execId, 'true', { timeoutS: 10 }))));
  if (baseline) viaBaseline.push(...(await sample(20, () => baseline.exec(baselineExecId, 'true', { timeoutS: 10 }))));
}
const d = median(direct);
const p = median(viaProvider);
const b = baseline ? `; baseline provider ${median(viaBaseline).toFixed(2)} ms, overhead ${(median(viaBaseline) - d).toFixed(2)} ms` : '';
report(
  `exec true: direct ${d.toFixed(2)} ms, provider ${p.toFixed(2)} ms, overhead ${(p - d).toFixed(2)} ms, ratio ${(p / d).toFixed(2)}x${b} (medians of 200; target overhead <= 3 ms)`,
);

// Plain and with an egress allow-list (its keeper starts the netns helper and the proxy), and
// the baseline revision's plain one when given, interleaved.
const ck: number[] = [];
const ckProxy: number[] = [];
const ckBaseline: number[] = [];
for (let i = 0; i < 15; i++) {
  for (const [into, pr, network] of [
    [ck, provider, undefined],
    [ckProxy, provider, { allowOut: ['127.0.0.1:9'] }],
    ...(baseline ? ([[ckBaseline, baseline, undefined]] as const) : []),
  ] as const) {
    into.push(
      ...(await sample(2, async () => {
        const m = await pr.create({ timeoutS: 60, ...(network ? { network } : {}) });
        await pr.kill(m.sandbox_id);
      })),
    );
  }
}
const cb = baseline ? `; baseline median ${median(ckBaseline).toFixed(1)} ms, min ${Math.min(...ckBaseline).toFixed(1)}` : '';
report(
  `create+kill: median ${median(ck).toFixed(1)} ms, min ${Math.min(...ck).toFixed(1)}, max ${Math.max(...ck).toFixed(1)}${cb} (30 runs each, interleaved; target: at most 100 ms above the baseline revision)`,
);
report(
  `create+kill with an allow-list (proxy): median ${median(ckProxy).toFixed(1)} ms vs ${median(ck).toFixed(1)} ms without, ratio ${(median(ckProxy) / median(ck)).toFixed(2)}x (30 runs each, interleaved)`,
);
await measureProxyThroughput();

const t = performance.now();
const ids = (await Promise.all(Array.from({ length: 20 }, () => provider.create({ timeoutS: 300 })))).map((m) => m.sandbox_id);
const createMs = performance.now() - t;
await Promise.all(ids.map((id) => provider.exec(id, 'nohup sh -c "while :; do sleep 1; done" >/dev/null 2>&1 &', { timeoutS: 10 })));
const busy = await sample(5, () => Promise.all(ids.map((id) => provider.exec(id, 'true', { timeoutS: 10 }))));
// Idle cost per sandbox: keeper (node) + bwrap + pid 1 and its sleep, the task's processes aside.
let rss = 0;
let pss = 0;
let keeperRss = 0;
for (const id of ids) {
  const rec = readKeeperRecord(`${stateDir}/local/${id}`)!;
  const loopSleep = childrenOf(rec.pid1.pid).filter((c) => readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('86400'));
  for (const pid of [rec.keeper.pid, rec.bwrap.pid, rec.pid1.pid, ...loopSleep]) {
    rss += rssKb(pid);
    pss += pssKb(pid);
  }
  keeperRss += rssKb(rec.keeper.pid);
}
const n = ids.length;
report(
  `20 concurrent sandboxes with a task each: created in ${createMs.toFixed(0)} ms; exec true in all 20 at once ${median(busy).toFixed(1)} ms; ` +
    `per idle sandbox RSS ${(rss / n / 1024).toFixed(1)} MiB (keeper ${(keeperRss / n / 1024).toFixed(1)} MiB), PSS ${(pss / n / 1024).toFixed(1)} MiB`,
);
await Promise.all(ids.map((id) => provider.kill(id)));

/**
 * 64 MiB from a server on the host's loopback: fetched by curl inside a sandbox through its egress
 * proxy, and by curl on the host directly (the baseline), interleaved.
 */
async function measureProxyThroughput(): Promise<void> {
  const { createServer } = await import('node:http');
  const body = Buffer.alloc(64 * 1024 * 1024);
  const server = createServer((_req, res) => res.end(body));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as { port: number }).port;
  const url = `http://127.0.0.1:${port}/`;
  const id = (await provider.create({ timeoutS: 300, network: { allowOut: [`127.0.0.1:${port}`] } })).sandbox_id;
  const hostCurl = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const child = spawn('curl', ['-sS', '-o', '/dev/null', url], { stdio: 'ignore', env: { PATH: '/usr/bin:/bin' } });
      child.on('error', reject);
      child.on('close', () => resolve());
    });
  const direct: number[] = [];
  const forwarded: number[] = [];
  const tunnelled: number[] = [];
  for (let i = 0; i < 5; i++) {
    direct.push(...(await sample(2, hostCurl)));
    forwarded.push(...(await sample(2, () => provider.exec(id, `curl -sS -o /dev/null ${url}`, { timeoutS: 60 }))));
    // --proxytunnel: CONNECT, the way HTTPS goes through the proxy.
    tunnelled.push(...(await sample(2, () => provider.exec(id, `curl -sS -p -o /dev/null ${url}`, { timeoutS: 60 }))));
  }
  await provider.kill(id);
  server.close();
  const line = (what: string, xs: number[]): string =>
    `${what} ${median(xs).toFixed(0)} ms (${(64 / (median(xs) / 1000)).toFixed(0)} MiB/s, ${(median(xs) / median(direct)).toFixed(2)}x)`;
  report(
    `64 MiB from the host loopback: ${line('host curl direct', direct)}; from a sandbox through its egress proxy, ${line('forwarded (http://)', forwarded)}, ${line('tunnelled (CONNECT)', tunnelled)} (10 runs each, interleaved)`,
  );
}

describe('local exec: `true` through the provider vs spawned directly', () => {
  bench('true spawned directly', spawnTrue, { time: 1500, warmupIterations: 10 });
  bench(
    'true through provider.exec',
    async () => {
      await provider.exec(execId, 'true', { timeoutS: 10 });
    },
    { time: 1500, warmupIterations: 10 },
  );
});

describe('local create + kill', () => {
  bench(
    'create + kill',
    async () => {
      const m = await provider.create({ timeoutS: 60 });
      await provider.kill(m.sandbox_id);
    },
    { time: 1500, warmupIterations: 2 },
  );
});
