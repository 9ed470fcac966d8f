// Benchmarks of the agent (`npm run bench`). Headline figures are measured once at load, in one
// run, interleaved so machine load skews both sides alike, and printed as ratios:
//   drain:   a supervised task writing 1 GiB to stdout vs `cmd | cat > /dev/null` (target <= 1.5x)
//   memory:  the supervisor's peak RSS (VmHWM) while draining (target <= 45 MB)
//   get:     `node agent.cjs call <get>` vs `node -e 0`, both with a clean env (target <= 1.5x)
//   start:   a cold supervisor's fixed part (a task of `true`, process start to exit) and the
//            CPU of each process (get, supervisor, node -e 0), from this process's reaped children
// SANDBOX_MCP_BENCH_BASELINE=<a built checkout of another revision> adds that revision's agent to
// the get and start rounds, interleaved, each with its own state folder.
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
const baselineDir = process.env.SANDBOX_MCP_BENCH_BASELINE;
const baselineAgent = baselineDir ? join(baselineDir, 'dist/agent.cjs') : null;
const floorMs: number[] = [];
const superviseMs: number[] = [];
const baselineMs: number[] = [];
const peaksKb: number[] = [];
/** Supervises a task writing 1 GiB with `agent`; returns its run (process start to exit). */
async function drain(agent: string): Promise<{ ms: number; peakKb: number }> {
  const dir = taskDir(PRODUCER);
  const run = await timed(process.execPath, [agent, 'supervise', dir]);
  const status = JSON.parse(readFileSync(join(dir, 'status.json'), 'utf8')) as { state: string; stdout_truncated: boolean };
  if (status.state !== 'succeeded' || !status.stdout_truncated) throw new Error(`drain task ended ${status.state}`);
  rmSync(dir, { recursive: true, force: true });
  return run;
}
for (let i = 0; i < 3; i++) {
  floorMs.push((await timed('/bin/sh', ['-c', `${PRODUCER} | cat > /dev/null`])).ms);
  const run = await drain(AGENT);
  superviseMs.push(run.ms);
  peaksKb.push(run.peakKb);
  if (baselineAgent) baselineMs.push((await drain(baselineAgent)).ms);
}
const floor = median(floorMs);
const supervised = median(superviseMs);
report(
  `drain 1 GiB: cat floor ${floor.toFixed(0)} ms, supervisor ${supervised.toFixed(0)} ms (process start to exit), ratio ${(supervised / floor).toFixed(2)}x (medians of 3; target <= 1.5x)` +
    (baselineAgent ? `; baseline's supervisor ${median(baselineMs).toFixed(0)} ms, ${(median(baselineMs) / floor).toFixed(2)}x` : ''),
);
report(`supervisor peak RSS while draining: ${(Math.max(...peaksKb) / 1024).toFixed(1)} MiB (max of 3; VmHWM; target <= 45 MB)`);

// --- get latency ----------------------------------------------------------------------------
/** An agent to time: this checkout's, or the baseline's, each with a state folder of its own. */
interface Agent {
  name: string;
  file: string;
  env: Record<string, string>;
  getArg: string;
}

/** Starts a task of `echo hello` with `agent` (so that its get has a finished task to read, and its state folder exists). */
function agentWithTask(name: string, file: string, state: string): Agent {
  const env = { ...cleanEnv, SANDBOX_AGENT_STATE_DIR: state };
  const id = randomBytes(16).toString('hex');
  spawnSync(process.execPath, [file, 'call', encodeRequest({ protocol: 1, op: 'start', task_id: id, command: 'echo hello' })], { env });
  return { name, file, env, getArg: encodeRequest({ protocol: 1, op: 'get', task_id: id }) };
}

const agents = [
  agentWithTask('agent', AGENT, stateDir),
  ...(baselineAgent ? [agentWithTask('baseline', baselineAgent, join(base, 'baseline-state'))] : []),
];

/** The CPU (user + system, ms) of this process's children reaped so far: /proc/self/stat's cutime and cstime. */
function childrenCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8')
    .replace(/^.*\) /, '')
    .split(' ');
  return ((Number(fields[13]) + Number(fields[14])) * 1000) / 100; // fields 16 and 17 of proc(5); USER_HZ 100
}

/** Runs `argv` to exit with `env`; returns its wall time and CPU (ms). */
function timedSync(argv: string[], env: Record<string, string>, check?: (stdout: string) => boolean): { ms: number; cpuMs: number } {
  const cpu = childrenCpuMs();
  const t = performance.now();
  const r = spawnSync(process.execPath, argv, { env, encoding: 'utf8' });
  const ms = performance.now() - t;
  if (check && !check(r.stdout)) throw new Error(`${argv.join(' ')} failed`);
  return { ms, cpuMs: childrenCpuMs() - cpu };
}

const runGetOf = (agent: Agent) => timedSync([agent.file, 'call', agent.getArg], agent.env, (out) => out.includes('"ok":true'));
const runNodeTimed = () => timedSync(['-e', '0'], cleanEnv);
const runGet = () => void runGetOf(agents[0]!);
const runNode = () => void runNodeTimed();
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const nodeRuns: { ms: number; cpuMs: number }[] = [];
const getRuns = new Map(agents.map((a) => [a.name, [] as { ms: number; cpuMs: number }[]]));
for (let i = 0; i < 40; i++) {
  nodeRuns.push(runNodeTimed());
  for (const agent of i % 2 ? [...agents].reverse() : agents) getRuns.get(agent.name)!.push(runGetOf(agent));
}
const n0 = median(nodeRuns.map((r) => r.ms));
const n0Cpu = mean(nodeRuns.map((r) => r.cpuMs));
for (const agent of agents) {
  const runs = getRuns.get(agent.name)!;
  const g = median(runs.map((r) => r.ms));
  const cpu = mean(runs.map((r) => r.cpuMs));
  report(
    `get latency (${agent.name}): node -e 0 ${n0.toFixed(1)} ms, agent get ${g.toFixed(1)} ms, ratio ${(g / n0).toFixed(2)}x; CPU ${cpu.toFixed(1)} against ${n0Cpu.toFixed(1)} ms, ${(cpu / n0Cpu).toFixed(2)}x (medians of 40, CPU means, interleaved; target <= 1.5x)`,
  );
}

// --- a cold supervisor's fixed part ---------------------------------------------------------
/** Supervises a task of `true` in `agent`'s state folder, process start to exit. */
function superviseTrue(agent: Agent): { ms: number; cpuMs: number } {
  const id = randomBytes(16).toString('hex');
  const dir = join(agent.env.SANDBOX_AGENT_STATE_DIR!, 'tasks', id);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const request = { task_id: id, command: 'true', cwd: base, timeout_s: 600, grace_ms: 2000, drain_ms: 500, poll_ms: 50 };
  writeFileSync(join(dir, 'request.json'), JSON.stringify(request));
  const run = timedSync([agent.file, 'supervise', dir], agent.env);
  const status = JSON.parse(readFileSync(join(dir, 'status.json'), 'utf8')) as { state: string };
  if (status.state !== 'succeeded') throw new Error(`supervised true ended ${status.state}`);
  rmSync(dir, { recursive: true, force: true });
  return run;
}
const superviseRuns = new Map(agents.map((a) => [a.name, [] as { ms: number; cpuMs: number }[]]));
for (let i = 0; i < 20; i++) {
  for (const agent of i % 2 ? [...agents].reverse() : agents) superviseRuns.get(agent.name)!.push(superviseTrue(agent));
}
for (const agent of agents) {
  const runs = superviseRuns.get(agent.name)!;
  report(
    `supervisor fixed part (${agent.name}): a task of true ${median(runs.map((r) => r.ms)).toFixed(1)} ms process start to exit, CPU ${mean(runs.map((r) => r.cpuMs)).toFixed(1)} ms (median of 20, CPU mean, interleaved; node -e 0 ${n0.toFixed(1)} ms, CPU ${n0Cpu.toFixed(1)})`,
  );
}

describe('agent get latency vs node -e 0 (clean environment)', () => {
  bench('node -e 0', runNode, { time: 1000, warmupIterations: 3 });
  bench('node agent.cjs call get', runGet, { time: 1000, warmupIterations: 3 });
});
