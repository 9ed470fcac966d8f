// Benchmarks of the agent (`npm run bench`). Headline figures are measured once at load, in one
// run, interleaved so machine load skews both sides alike, and printed as ratios:
//   drain:   a supervised task writing 1 GiB to stdout vs `cmd | cat > /dev/null` (target <= 1.5x)
//   memory:  the supervisor's peak RSS (VmHWM) while draining (target <= 45 MB)
//   get:     `node agent.cjs call <get>` vs `node -e 0`, both with a clean env (target <= 1.5x)
// vitest's own tables follow for the get latency pair.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bench, describe } from 'vitest';
import { encodeRequest } from '../../shared/protocol.js';
import { median } from '../support/measure.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const AGENT = join(ROOT, 'dist/agent.cjs');
if (!existsSync(AGENT)) execFileSync(process.execPath, [join(ROOT, 'build/build.mjs')]);

const GIB = 1024 * 1024 * 1024;
const PRODUCER = `head -c ${GIB} /dev/zero`;
const base = mkdtempSync(join(tmpdir(), 'agent-bench-'));
const stateDir = join(base, 'state');
// A clean environment: this machine's NODE_EXTRA_CA_CERTS alone adds ~40 ms to a node start.
const cleanEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: base, SANDBOX_AGENT_STATE_DIR: stateDir };
process.once('exit', () => rmSync(base, { recursive: true, force: true }));

function report(line: string): void {
  process.stderr.write(`[agent bench] ${line}\n`);
}

function hwmKb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Runs a process to exit; returns its wall time and (sampled) peak RSS. */
function timed(cmd: string, args: string[]): Promise<{ ms: number; peakKb: number }> {
  return new Promise((resolvePromise, reject) => {
    const t = performance.now();
    const child = spawn(cmd, args, { env: cleanEnv, stdio: 'ignore' });
    let peakKb = 0;
    // VmHWM is the kernel's own high-water mark, so sampling it late still catches the peak.
    const sampler = setInterval(() => (peakKb = Math.max(peakKb, hwmKb(child.pid!))), 5);
    child.on('error', reject);
    child.on('exit', () => {
      clearInterval(sampler);
      resolvePromise({ ms: performance.now() - t, peakKb });
    });
  });
}

/** A prepared task directory, so the supervisor can be run (and timed) directly. */
function taskDir(command: string): string {
  const id = randomBytes(16).toString('hex');
  const dir = join(stateDir, 'tasks', id);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const request = { task_id: id, command, cwd: base, timeout_s: 600, grace_ms: 2000, drain_ms: 500, poll_ms: 50 };
  writeFileSync(join(dir, 'request.json'), JSON.stringify(request));
  return dir;
}

// --- drain and memory ---------------------------------------------------------------------
const floorMs: number[] = [];
const superviseMs: number[] = [];
const peaksKb: number[] = [];
for (let i = 0; i < 3; i++) {
  floorMs.push((await timed('/bin/sh', ['-c', `${PRODUCER} | cat > /dev/null`])).ms);
  const dir = taskDir(PRODUCER);
  const run = await timed(process.execPath, [AGENT, 'supervise', dir]);
  const status = JSON.parse(readFileSync(join(dir, 'status.json'), 'utf8')) as { state: string; stdout_truncated: boolean };
  if (status.state !== 'succeeded' || !status.stdout_truncated) throw new Error(`drain task ended ${status.state}`);
  superviseMs.push(run.ms);
  peaksKb.push(run.peakKb);
}
const floor = median(floorMs);
const supervised = median(superviseMs);
report(
  `drain 1 GiB: cat floor ${floor.toFixed(0)} ms, supervisor ${supervised.toFixed(0)} ms (process start to exit), ratio ${(supervised / floor).toFixed(2)}x (medians of 3; target <= 1.5x)`,
);
report(`supervisor peak RSS while draining: ${(Math.max(...peaksKb) / 1024).toFixed(1)} MiB (max of 3; VmHWM; target <= 45 MB)`);

// --- get latency ----------------------------------------------------------------------------
const getId = randomBytes(16).toString('hex');
spawnSync(process.execPath, [AGENT, 'call', encodeRequest({ protocol: 1, op: 'start', task_id: getId, command: 'echo hello' })], {
  env: cleanEnv,
});
const getArg = encodeRequest({ protocol: 1, op: 'get', task_id: getId });
const runGet = () => {
  const r = spawnSync(process.execPath, [AGENT, 'call', getArg], { env: cleanEnv, encoding: 'utf8' });
  if (!r.stdout.includes('"ok":true')) throw new Error('get failed');
};
const runNode = () => void spawnSync(process.execPath, ['-e', '0'], { env: cleanEnv });
const nodeMs: number[] = [];
const getMs: number[] = [];
for (let i = 0; i < 40; i++) {
  let t = performance.now();
  runNode();
  nodeMs.push(performance.now() - t);
  t = performance.now();
  runGet();
  getMs.push(performance.now() - t);
}
const n0 = median(nodeMs);
const g = median(getMs);
report(
  `get latency: node -e 0 ${n0.toFixed(1)} ms, agent get ${g.toFixed(1)} ms, ratio ${(g / n0).toFixed(2)}x (medians of 40, interleaved; target <= 1.5x)`,
);

describe('agent get latency vs node -e 0 (clean environment)', () => {
  bench('node -e 0', runNode, { time: 1000, warmupIterations: 3 });
  bench('node agent.cjs call get', runGet, { time: 1000, warmupIterations: 3 });
});
