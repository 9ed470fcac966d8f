// Issue 36: what each call costs in CPU, how the server holds up under concurrent use, whether a
// fast call waits for another in flight, and what an idle sandbox holds, each printed beside its
// target. Printed, not asserted: a measurement.
//
// CPU is accounted by process, not host-wide (the machine is shared): the server's own
// utime+stime from /proc/<pid>/stat plus, for each sandbox, every process under its keeper with
// the CPU of the children they reaped (cutime+cstime), the idle rate measured just before
// subtracted. Processes and threads started per call are counted in the sandbox's pid namespace
// (its ns_last_pid, read through nsenter, whose own pid is taken off).
//
// The concurrent load over HTTP runs twice for each build: driven by the SDK's Client, as an agent
// would, and by lean clients (lean-mcp-client.ts: raw JSON-RPC, every answer checked), whose own
// CPU is a third of the SDK's: the rate the server holds with its clients' share made small. Each
// round prints where the CPU went, by process kind (the server, the keepers' relays, the residents,
// the supervisors and what they reaped, the bench's own clients), the rate the server's tree alone
// would allow on this machine's cores, and the whole machine's busy time with what lies outside the
// load (interrupts, the kernel's threads, other processes: the machine is shared).
//
// SANDBOX_MCP_BENCH_BASELINE=<a built checkout of another revision> measures that revision's CPU per
// call beside this one's, interleaved tool by tool, and its concurrent load after this one's.
// CONCURRENCY_SESSIONS (16), CONCURRENCY_CALLS (30), CONCURRENCY_ROUNDS (3), IDLE_SANDBOXES (8);
// CONCURRENCY_BACKGROUND_AFTER: the load's run_command `background_after` (unset: the tool's
// default, a promotable exec); CONCURRENCY_PHASES: which parts run (cpu,head,load,idle: all).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os, { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bench, describe } from 'vitest';
import { readKeeperRecord, RESIDENT_FILE } from '../../host/providers/local/sandbox/state-dir.js';
import type { ResidentRecord } from '../../host/providers/local/keeper/resident.js';
import { median } from '../support/measure.js';
import { openLeanSession } from './lean-mcp-client.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HOST = join(ROOT, 'dist/host.js');
if (!existsSync(HOST)) execFileSync(process.execPath, [join(ROOT, 'build/build.mjs')]);
const baselineDir = process.env.SANDBOX_MCP_BENCH_BASELINE;
const SESSIONS = Number(process.env.CONCURRENCY_SESSIONS ?? 16);
const CALLS = Number(process.env.CONCURRENCY_CALLS ?? 30);
const ROUNDS = Number(process.env.CONCURRENCY_ROUNDS ?? 3);
const IDLE_SANDBOXES = Number(process.env.IDLE_SANDBOXES ?? 8);
const LOAD_BACKGROUND_AFTER = optionalSeconds('CONCURRENCY_BACKGROUND_AFTER');
const PHASES = phases('CONCURRENCY_PHASES', ['cpu', 'head', 'load', 'idle']);
/** Calls per tool for CPU per call, this far apart (the issue measured 20 calls 300 ms apart). */
const CPU_CALLS = 30;
const CPU_GAP_MS = 300;
const TICK_MS = 10; // USER_HZ 100
const out = (line: string) => process.stderr.write(`[concurrency] ${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const baseEnv = (stateDir: string) => ({
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/root',
  SANDBOX_MCP_STATE_DIR: stateDir,
});

function optionalSeconds(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === '') return undefined;
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number of seconds, 0 or more`);
  return n;
}
function phases(name: string, all: readonly string[]): Set<string> {
  const chosen = (process.env[name] ?? all.join(',')).split(',').filter(Boolean);
  if (chosen.some((p) => !all.includes(p))) throw new Error(`${name} takes a list of ${all.join(', ')}`);
  return new Set(chosen);
}

type Call = (name: string, args: Record<string, unknown>) => Promise<Record<string, any>>;
function caller(client: Client): Call {
  return async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
    return r.structuredContent as Record<string, any>;
  };
}

// --- /proc accounting ---------------------------------------------------------------------------

interface Stat {
  ppid: number;
  /** Its own CPU plus what it reaped, in ticks. */
  ticks: number;
  ownTicks: number;
  reapedTicks: number;
  /** Its start time (ticks after boot): a pid and this name one process. */
  start: string;
}
function statOf(pid: number): Stat | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    const ownTicks = Number(f[11]) + Number(f[12]);
    const reapedTicks = Number(f[13]) + Number(f[14]);
    return { ppid: Number(f[1]), ticks: ownTicks + reapedTicks, ownTicks, reapedTicks, start: f[19]! };
  } catch {
    return null;
  }
}
function processTable(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const st = statOf(Number(name));
    if (st) children.set(st.ppid, [...(children.get(st.ppid) ?? []), Number(name)]);
  }
  return children;
}
/** `roots` and every process under them, each looked at once. */
function statsUnder(roots: readonly number[]): Map<number, Stat> {
  const children = processTable();
  const look = new Map<number, Stat>();
  const walk = (pid: number): void => {
    const st = look.has(pid) ? null : statOf(pid);
    if (!st) return;
    look.set(pid, st);
    for (const c of children.get(pid) ?? []) walk(c);
  };
  for (const r of roots) walk(r);
  return look;
}
/** CPU (ms) of `roots` and every process under them, with what they reaped. */
function treeCpuMs(roots: number[]): number {
  let ticks = 0;
  for (const st of statsUnder(roots).values()) ticks += st.ticks;
  return ticks * TICK_MS;
}
/**
 * CPU time the whole machine spent busy (every core, every process, the kernel's own threads
 * included), from /proc/stat: what bounds the load's rate, the bench's own clients among it. Of it,
 * the time in interrupts (a load over loopback TCP has its packets' softirqs there).
 */
function machineBusy(): { busyMs: number; interruptsMs: number } {
  const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1, 8).map(Number);
  const [user, nice, system, , , irq, softirq] = fields as [number, number, number, number, number, number, number];
  return { busyMs: (user + nice + system + irq + softirq) * TICK_MS, interruptsMs: (irq + softirq) * TICK_MS };
}
/** The kernel's own threads (kthreadd and its children: kworkers, ksoftirqd, rcu) and their CPU so far. */
function kernelThreads(): Map<number, Stat> {
  const look = new Map<number, Stat>();
  for (const pid of [2, ...(processTable().get(2) ?? [])]) {
    const st = statOf(pid);
    if (st) look.set(pid, st);
  }
  return look;
}
/** CPU (ms) the kernel's threads took between two looks; a thread that ended in between takes its share with it. */
function kernelThreadsMs(before: Map<number, Stat>, after: Map<number, Stat>): number {
  let ticks = 0;
  for (const [pid, st] of after) {
    const was = before.get(pid);
    ticks += st.ownTicks - (was?.start === st.start ? was.ownTicks : 0);
  }
  return ticks * TICK_MS;
}

function pssKiB(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

// --- CPU by process kind under a load ------------------------------------------------------------

/** What a process under the HTTP server is, from its argv (the agent's roles as stop-processes.ts reads them). */
type Kind = 'server' | 'keeper' | 'resident' | 'supervisor' | 'other';
const KIND_NAMES: readonly [Kind, string][] = [
  ['server', 'server'],
  ['keeper', 'keeper relay'],
  ['resident', 'resident'],
  ['supervisor', 'supervisors'],
  ['other', 'other (bwrap, pid 1, nsenter)'],
];
function kindOf(pid: number, serverPid: number): Kind {
  if (pid === serverPid) return 'server';
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
  } catch {
    return 'other';
  }
  if (argv.some((a) => a.endsWith('/keeper.cjs'))) return 'keeper';
  const at = argv.findIndex((a) => /\/agent-[^/]*\.cjs$/.test(a));
  const role = at < 0 ? undefined : argv[at + 1];
  return role === 'serve' ? 'resident' : role === 'supervise' ? 'supervisor' : 'other';
}

type TreeLook = Map<number, Stat & { kind: Kind }>;
/** The server and every process under it (keepers, sandboxes, residents, supervisors, commands). */
function serverTree(serverPid: number): TreeLook {
  const look: TreeLook = new Map();
  for (const [pid, st] of statsUnder([serverPid])) look.set(pid, { ...st, kind: kindOf(pid, serverPid) });
  return look;
}
/**
 * CPU (ms) by kind between two looks at the server's tree: each process's own, and what the
 * processes of a kind reaped (`<kind> children`: a supervisor's commands, a resident's execs).
 */
function cpuByKind(before: TreeLook, after: TreeLook): Map<string, number> {
  const ms = new Map<string, number>();
  const add = (key: string, ticks: number) => ms.set(key, (ms.get(key) ?? 0) + ticks * TICK_MS);
  const sameProcess = (a: Stat | undefined, b: Stat | undefined) => a !== undefined && b !== undefined && a.start === b.start;
  for (const [pid, p] of after) {
    const was = sameProcess(before.get(pid), p) ? before.get(pid) : undefined;
    add(p.kind, p.ownTicks - (was?.ownTicks ?? 0));
    add(`${p.kind} children`, p.reapedTicks - (was?.reapedTicks ?? 0));
  }
  // A process that ended in between was reaped with all its CPU, what it had used before the first
  // look too: that part comes off its parent's children.
  for (const [pid, p] of before) {
    if (sameProcess(after.get(pid), p)) continue;
    add(`${before.get(p.ppid)?.kind ?? 'other'} children`, -p.ticks);
  }
  return ms;
}
/** The CPU a load round took, in ms: by kind under the server, the bench's own, the machine's. */
interface RoundCpu {
  byKind: Map<string, number>;
  clientsMs: number;
  machineMs: number;
  interruptsMs: number;
  kernelThreadsMs: number;
}
/**
 * One round's CPU per call, by kind, beside the bench's own clients' and the whole machine's, and
 * the rate the server's tree alone would allow on this machine's cores (a bound: the kernel's
 * share of the load, its loopback networking and scheduling, is outside the tree).
 */
function cpuBreakdown(cpu: RoundCpu, calls: number): string {
  const perCall = (ms: number) => (ms / calls).toFixed(2);
  const cores = os.cpus().length;
  let treeMs = 0;
  const parts = KIND_NAMES.map(([kind, name]) => {
    const own = cpu.byKind.get(kind) ?? 0;
    const reaped = cpu.byKind.get(`${kind} children`) ?? 0;
    treeMs += own + reaped;
    return reaped >= TICK_MS ? `${name} ${perCall(own)} + its children ${perCall(reaped)}` : `${name} ${perCall(own)}`;
  });
  const sum = treeMs + cpu.clientsMs;
  const outside = cpu.machineMs - sum;
  return (
    `CPU ms/call: ${parts.join(', ')}; the server's tree ${perCall(treeMs)} (alone: at most ${((cores * 1000 * calls) / treeMs).toFixed(0)} calls/s on ${cores} cores); ` +
    `the bench's clients ${perCall(cpu.clientsMs)}; together ${perCall(sum)}; the whole machine busy ${perCall(cpu.machineMs)}, ` +
    `${perCall(outside)} outside these: interrupts ${perCall(cpu.interruptsMs)}, the kernel's threads ${perCall(cpu.kernelThreadsMs)}, ` +
    `other processes ${perCall(outside - cpu.interruptsMs - cpu.kernelThreadsMs)}`
  );
}

// --- one server over stdio, one sandbox ---------------------------------------------------------

interface Subject {
  label: string;
  call: Call;
  serverPid: number;
  sandboxId: string;
  keeperPid: number;
  pid1: number;
  taskId: string;
  stateDir: string;
  close(): Promise<void>;
}

async function subject(label: string, hostJs: string): Promise<Subject> {
  const stateDir = mkdtempSync(join(tmpdir(), 'concurrency-bench-'));
  const transport = new StdioClientTransport({ command: process.execPath, args: [hostJs], env: baseEnv(stateDir), stderr: 'ignore' });
  const client = new Client({ name: 'concurrency-bench', version: '1' });
  await client.connect(transport);
  const call = caller(client);
  const sandboxId = String((await call('create_sandbox', { timeout: 900 })).sandbox_id);
  const dir = join(stateDir, 'local', sandboxId.replace(/^local:/, ''));
  const keeper = readKeeperRecord(dir)!;
  await call('write_file', { sandbox_id: sandboxId, path: 'f.txt', content: 'x' });
  const taskId = String((await call('start_task', { sandbox_id: sandboxId, command: 'true' })).task_id);
  return {
    label,
    call,
    serverPid: transport.pid!,
    sandboxId,
    keeperPid: keeper.keeper.pid,
    pid1: keeper.pid1.pid,
    taskId,
    stateDir,
    async close() {
      await call('kill_sandbox', { sandbox_id: sandboxId }).catch(() => {});
      await client.close();
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/** The last pid handed out in the sandbox's pid namespace (nsenter's child, cat, takes one). */
const lastPid = (s: Subject) =>
  Number(execFileSync('nsenter', ['-t', String(s.pid1), '-p', '-m', 'cat', '/proc/sys/kernel/ns_last_pid']).toString());

const TOOLS: Record<string, (s: Subject) => Record<string, unknown> & { tool: string }> = {
  'run_command true (default background_after)': (s) => ({ tool: 'run_command', sandbox_id: s.sandboxId, command: 'true' }),
  'run_command true, background_after 0': (s) => ({ tool: 'run_command', sandbox_id: s.sandboxId, command: 'true', background_after: 0 }),
  'run_code bash true': (s) => ({ tool: 'run_code', sandbox_id: s.sandboxId, language: 'bash', code: 'true' }),
  get_task: (s) => ({ tool: 'get_task', sandbox_id: s.sandboxId, task_id: s.taskId }),
  read_file: (s) => ({ tool: 'read_file', sandbox_id: s.sandboxId, path: 'f.txt' }),
  write_file: (s) => ({ tool: 'write_file', sandbox_id: s.sandboxId, path: 'f.txt', content: 'y' }),
  list_files: (s) => ({ tool: 'list_files', sandbox_id: s.sandboxId, path: '.' }),
};
const callTool = (s: Subject, name: string) => {
  const { tool, ...args } = TOOLS[name]!(s);
  return s.call(tool, args);
};

/** CPU (host and sandbox) and pids per call of `name` on `s`. */
async function cpuPerCall(s: Subject, name: string): Promise<{ cpuMs: number; pids: number }> {
  for (let i = 0; i < 3; i++) {
    await callTool(s, name);
    await sleep(CPU_GAP_MS);
  }
  const roots = [s.serverPid, s.keeperPid];
  // Ticks are 10 ms: the idle rate over 3 s, so that its error spread over the calls stays small.
  const idle0 = treeCpuMs(roots);
  await sleep(3000);
  const idleRate = (treeCpuMs(roots) - idle0) / 3000;
  const c0 = treeCpuMs(roots);
  const p0 = lastPid(s);
  const t0 = performance.now();
  for (let i = 0; i < CPU_CALLS; i++) {
    await callTool(s, name);
    await sleep(CPU_GAP_MS);
  }
  const elapsed = performance.now() - t0;
  const cpuMs = (treeCpuMs(roots) - c0 - idleRate * elapsed) / CPU_CALLS;
  return { cpuMs, pids: (lastPid(s) - p0 - 1) / CPU_CALLS };
}

/** Each tool's CPU and pids per call, the builds interleaved tool by tool. */
async function cpuPerCallPhase(subjects: readonly Subject[]): Promise<void> {
  out(
    `CPU per call (host and sandbox; ${CPU_CALLS} calls ${CPU_GAP_MS} ms apart; target <= 10 ms and no node process), load ${loadavg()}:`,
  );
  for (const name of Object.keys(TOOLS)) {
    const cells: string[] = [];
    for (const s of subjects) {
      const r = await cpuPerCall(s, name);
      cells.push(`${s.label} ${r.cpuMs.toFixed(1)} ms, ${r.pids.toFixed(1)} pids`);
    }
    out(`  ${name}: ${cells.join(' | ')}`);
  }
}

// --- head of line: a fast call while another is in flight on the same sandbox -------------------

const headOfLine = async (s: Subject): Promise<string> => {
  const fast = () => callTool(s, 'run_command true (default background_after)');
  const timed = async (fn: () => Promise<unknown>) => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  const idle: number[] = [];
  const duringSlow: number[] = [];
  const afterStart: number[] = [];
  for (let i = 0; i < 10; i++) {
    await sleep(200);
    idle.push(await timed(fast));
    await sleep(200);
    const slow = s.call('run_command', { sandbox_id: s.sandboxId, command: 'sleep 1' });
    await sleep(100);
    duringSlow.push(await timed(fast));
    await slow;
    await sleep(200);
    await s.call('start_task', { sandbox_id: s.sandboxId, command: 'sleep 2' });
    afterStart.push(await timed(fast));
  }
  const m = median(idle);
  return `idle ${m.toFixed(1)} ms; during a run_command sleep 1 ${median(duringSlow).toFixed(1)} ms (${(median(duringSlow) / m).toFixed(2)}x); right after a start_task ${median(afterStart).toFixed(1)} ms (${(median(afterStart) / m).toFixed(2)}x) (target <= 2x)`;
};
async function headOfLinePhase(subjects: readonly Subject[]): Promise<void> {
  for (const s of subjects) out(`run_command true, medians of 10, ${s.label}: ${await headOfLine(s)}, load ${loadavg()}`);
}

// --- concurrent load over HTTP -------------------------------------------------------------------

/** Who drives the load: the SDK's Client, as an agent would, or the lean client. */
type ClientKind = 'SDK clients' | 'lean clients';

interface HttpServer {
  pid: number;
  url: URL;
  token: string;
  rssMiB(): number;
  stop(): Promise<void>;
}

async function startHttpServer(hostJs: string): Promise<HttpServer> {
  const stateDir = mkdtempSync(join(tmpdir(), 'concurrency-http-'));
  const token = `bench-${Date.now()}`;
  const server = spawn(process.execPath, [hostJs, 'http', '--port', '0'], {
    env: { ...baseEnv(stateDir), SANDBOX_MCP_TOKEN: token },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const url = await new Promise<URL>((done) => {
    let text = '';
    server.stderr!.on('data', (d: Buffer) => {
      text += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(text);
      if (m) done(new URL(m[1]!));
    });
  });
  return {
    pid: server.pid!,
    url,
    token,
    rssMiB: () => Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))?.[1]) / 1024),
    async stop() {
      server.kill('SIGTERM');
      await new Promise((r) => server.once('exit', r));
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

/** SESSIONS sessions of `clients`, each with a sandbox of its own. */
async function openSessions(
  server: HttpServer,
  clients: ClientKind,
  agent: http.Agent,
): Promise<{ call: Call; close(): Promise<void>; id: string }[]> {
  return Promise.all(
    Array.from({ length: SESSIONS }, async () => {
      let session: { call: Call; close(): Promise<void> };
      if (clients === 'lean clients') {
        const lean = await openLeanSession({ url: server.url, token: server.token, agent });
        session = { call: (name, args) => lean.callTool(name, args), close: () => lean.close() };
      } else {
        const client = new Client({ name: 'concurrency-http', version: '1' });
        await client.connect(
          new StreamableHTTPClientTransport(server.url, { requestInit: { headers: { authorization: `Bearer ${server.token}` } } }),
        );
        session = { call: caller(client), close: () => client.close() };
      }
      return { ...session, id: String((await session.call('create_sandbox', { timeout: 900 })).sandbox_id) };
    }),
  );
}

/** ROUNDS rounds of SESSIONS sessions x CALLS run_command `true`, all sessions at once, each printed with where its CPU went. */
async function concurrentLoad(label: string, hostJs: string, clients: ClientKind): Promise<void> {
  const server = await startHttpServer(hostJs);
  const agent = new http.Agent({ keepAlive: true });
  const sessions = await openSessions(server, clients, agent);
  const command = { command: 'true', ...(LOAD_BACKGROUND_AFTER === undefined ? {} : { background_after: LOAD_BACKGROUND_AFTER }) };
  const run = async (s: (typeof sessions)[number]) => {
    const r = await s.call('run_command', { sandbox_id: s.id, ...command });
    if (r.exit_code !== 0) throw new Error('run_command true failed');
  };
  for (const s of sessions) for (let i = 0; i < 2; i++) await run(s);
  const what = `${SESSIONS} HTTP sessions x ${CALLS} run_command true${LOAD_BACKGROUND_AFTER === undefined ? '' : `, background_after ${LOAD_BACKGROUND_AFTER}`}`;
  for (let round = 0; round < ROUNDS; round++) {
    const latencies: number[] = [];
    let errors = 0;
    const tree0 = serverTree(server.pid);
    const kernel0 = kernelThreads();
    const clients0 = process.cpuUsage();
    const busy0 = machineBusy();
    const t0 = performance.now();
    await Promise.all(
      sessions.map(async (s) => {
        for (let i = 0; i < CALLS; i++) {
          const t = performance.now();
          await run(s).catch(() => errors++);
          latencies.push(performance.now() - t);
        }
      }),
    );
    const elapsed = performance.now() - t0;
    const clientsCpu = process.cpuUsage(clients0);
    const busy = machineBusy();
    const cpu: RoundCpu = {
      byKind: cpuByKind(tree0, serverTree(server.pid)),
      clientsMs: (clientsCpu.user + clientsCpu.system) / 1000,
      machineMs: busy.busyMs - busy0.busyMs,
      interruptsMs: busy.interruptsMs - busy0.interruptsMs,
      kernelThreadsMs: kernelThreadsMs(kernel0, kernelThreads()),
    };
    latencies.sort((a, b) => a - b);
    out(
      `${label}, ${clients}: ${what}, round ${round + 1}: ${((latencies.length / elapsed) * 1000).toFixed(1)} calls/s (target >= 300), p50 ${latencies[latencies.length >> 1]!.toFixed(0)} ms, p95 ${latencies[Math.floor(latencies.length * 0.95)]!.toFixed(0)} ms (target <= 150), errors ${errors}, server RSS ${server.rssMiB()} MiB, load ${loadavg()}`,
    );
    out(`  ${cpuBreakdown(cpu, latencies.length)}`);
  }
  await Promise.all(sessions.map((s) => s.call('kill_sandbox', { sandbox_id: s.id }).catch(() => {})));
  // Closed before the server stops, so that no client goes on retrying into the next load's rounds.
  await Promise.all(sessions.map((s) => s.close().catch(() => {})));
  agent.destroy();
  await server.stop();
}

/** The load driven by the SDK's clients, then by lean ones; for each, this build's rounds then the baseline's. */
async function loadPhase(): Promise<void> {
  const builds: [string, string][] = [['this build', HOST]];
  if (baselineDir) builds.push(['baseline', join(baselineDir, 'dist/host.js')]);
  for (const clients of ['SDK clients', 'lean clients'] as const) {
    for (const [label, hostJs] of builds) await concurrentLoad(label, hostJs, clients);
  }
}

// --- idle memory 5 s after the last call ---------------------------------------------------------

async function idlePhase(): Promise<void> {
  const stateDir = mkdtempSync(join(tmpdir(), 'concurrency-idle-'));
  const client = new Client({ name: 'concurrency-idle', version: '1' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [HOST], env: baseEnv(stateDir), stderr: 'ignore' }));
  const call = caller(client);
  const ids: string[] = [];
  for (let i = 0; i < IDLE_SANDBOXES; i++) ids.push(String((await call('create_sandbox', { timeout: 900 })).sandbox_id));
  const dirOf = (id: string) => join(stateDir, 'local', id.replace(/^local:/, ''));
  const residentOf = (id: string) => (JSON.parse(readFileSync(join(dirOf(id), RESIDENT_FILE), 'utf8')) as ResidentRecord).resident;
  for (const id of ids) {
    await call('run_command', { sandbox_id: id, command: 'true' });
    await call('start_task', { sandbox_id: id, command: 'true' });
  }
  await sleep(5000);
  const table = processTable();
  const under = (pid: number): number[] => [pid, ...(table.get(pid) ?? []).flatMap(under)];
  // Everything under each keeper but the sandbox's own init (bwrap's tree): keeper, nsenter, resident, supervisors.
  const perSandbox = ids.map((id) => {
    const keeper = readKeeperRecord(dirOf(id))!;
    const bwrapTree = new Set(under(statOf(keeper.pid1.pid)!.ppid));
    return under(keeper.keeper.pid)
      .filter((p) => !bwrapTree.has(p))
      .reduce((sum, p) => sum + pssKiB(p), 0);
  });
  const running = ids.filter((id) => residentOf(id)).length;
  out(
    `idle PSS per sandbox 5 s after its last call (${IDLE_SANDBOXES} sandboxes; keeper, resident and anything warm): ${(perSandbox.reduce((a, b) => a + b, 0) / ids.length / 1024).toFixed(1)} MiB (target <= 20), residents running ${running}, node ${process.version}`,
  );
  for (const id of ids) await call('kill_sandbox', { sandbox_id: id });
  await client.close();
  rmSync(stateDir, { recursive: true, force: true });
}

if (PHASES.has('cpu') || PHASES.has('head')) {
  const subjects = [await subject('this build', HOST)];
  if (baselineDir) subjects.push(await subject('baseline', join(baselineDir, 'dist/host.js')));
  if (PHASES.has('cpu')) await cpuPerCallPhase(subjects);
  if (PHASES.has('head')) await headOfLinePhase(subjects);
  for (const s of subjects) await s.close();
}
if (PHASES.has('load')) await loadPhase();
if (PHASES.has('idle')) await idlePhase();

describe('concurrency and CPU per call', () => {
  bench('printed above', () => {}, { iterations: 1 });
});
