// Idle memory per local sandbox (issue 21: keeper + resident <= 20 MiB PSS), measured the way
// docs/performance.md reports it: one built server over stdio creates SANDBOXES sandboxes, runs
// `true` in each through its resident, lets them idle 30 s, and reads each process's proportional set
// size from /proc/<pid>/smaps_rollup (PSS shares file pages among the processes mapping them, so
// the figure per sandbox falls as sandboxes are added). That is an idle sandbox within its
// resident's quiet period (the default, RESIDENT_IDLE_EXIT_DEFAULT_S); then, once every resident has
// exited after it, and 10 s more, the keepers alone: an idle sandbox past its quiet period.
// Printed, not asserted: a measurement.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, bench, describe } from 'vitest';
import { RESIDENT_IDLE_EXIT_DEFAULT_S } from '../../shared/limits.js';
import { RESIDENT_FILE, readKeeperRecord } from '../../host/providers/local/sandbox/state-dir.js';
import type { ResidentRecord } from '../../host/providers/local/keeper/resident.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const HOST = join(ROOT, 'dist/host.js');
if (!existsSync(HOST)) execFileSync(process.execPath, [join(ROOT, 'build/build.mjs')]);

const SANDBOXES = Number(process.env.IDLE_SANDBOXES ?? 8);
/** Idle this long: V8's memory reducer shrinks the heap some 8 s after the last allocation burst. */
const IDLE_MS = 30_000;
/** The residents' quiet period (the server's default): longer than IDLE_MS, so that the first reading finds them. */
const QUIET_S = RESIDENT_IDLE_EXIT_DEFAULT_S;
if (QUIET_S * 1000 <= IDLE_MS) throw new Error('the quiet period must outlast the first idle reading');
/** After the last resident exited, idle this long before the keepers are read alone. */
const AFTER_EXIT_MS = 10_000;
const stateDir = mkdtempSync(join(tmpdir(), 'idle-bench-'));
// A clean environment: this machine's NODE_EXTRA_CA_CERTS alone adds ~40 ms to a node start.
const env = {
  PATH: process.env.PATH ?? '/usr/bin:/bin',
  HOME: process.env.HOME ?? '/root',
  SANDBOX_MCP_STATE_DIR: stateDir,
};
const client = new Client({ name: 'idle-bench', version: '1' });
await client.connect(new StdioClientTransport({ command: process.execPath, args: [HOST], env, stderr: 'ignore' }));

async function call(name: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent as Record<string, any>;
}
const dirOf = (id: string) => join(stateDir, 'local', id.replace(/^local:/, ''));
function residentOf(id: string): ResidentRecord | null {
  try {
    return JSON.parse(readFileSync(join(dirOf(id), RESIDENT_FILE), 'utf8')) as ResidentRecord;
  } catch {
    return null;
  }
}
/** Proportional set size of `pid` in KiB, 0 when gone. */
function pssKiB(pid: number): number {
  try {
    return Number(/^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}
/** Anonymous memory of `pid` in KiB (what a sandbox's memory limit is charged for). */
function anonKiB(pid: number): number {
  try {
    return Number(/^Anonymous:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}
const parentOf = (pid: number) =>
  Number(
    readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /s, '')
      .split(' ')[1],
  );

const ids: string[] = [];
for (let i = 0; i < SANDBOXES; i++) ids.push(String((await call('create_sandbox', { timeout: 900 })).sandbox_id));
for (const id of ids) {
  for (let i = 0; i < 500 && !residentOf(id)?.resident; i++) await new Promise((r) => setTimeout(r, 20));
  if (!residentOf(id)?.resident) throw new Error('a resident agent never started');
  await call('run_command', { sandbox_id: id, command: 'true' });
}
await new Promise((r) => setTimeout(r, IDLE_MS));
const sum = (f: (id: string) => number) => ids.reduce((s, id) => s + f(id), 0) / ids.length / 1024;
const keeperPid = (id: string) => readKeeperRecord(dirOf(id))!.keeper.pid;
const residentPid = (id: string) => residentOf(id)!.resident!.pid;
const keeper = sum((id) => pssKiB(keeperPid(id)));
const resident = sum((id) => pssKiB(residentPid(id)));
const nsenter = sum((id) => pssKiB(parentOf(residentPid(id))));
// Whatever the resident still runs (a supervisor booted ahead that was not retired) counts too.
const childrenOf = (pid: number): number[] =>
  readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((p) => {
      try {
        return parentOf(p) === pid;
      } catch {
        return false;
      }
    });
const residentChildren = ids.reduce((n, id) => n + childrenOf(residentPid(id)).length, 0);
const children = sum((id) => childrenOf(residentPid(id)).reduce((s, p) => s + pssKiB(p), 0));
const out = (line: string) => process.stderr.write(`[idle memory] ${line}\n`);
out(
  `${SANDBOXES} idle sandboxes within the quiet period, PSS per sandbox: keeper ${keeper.toFixed(1)} + resident ${resident.toFixed(1)} + its nsenter ${nsenter.toFixed(1)} + its children ${children.toFixed(1)} (${residentChildren} in all) = ${(keeper + resident + nsenter + children).toFixed(1)} MiB (<= 20 MiB); anonymous: keeper ${sum((id) => anonKiB(keeperPid(id))).toFixed(1)}, resident ${sum((id) => anonKiB(residentPid(id))).toFixed(1)} MiB; node ${process.version}`,
);

// Past the quiet period: every resident exits (its keeper stays), and only the keeper is left.
const residents = ids.map((id) => residentOf(id)!.resident!);
for (let i = 0; i < 1500 && ids.some((id) => residentOf(id)?.resident); i++) await new Promise((r) => setTimeout(r, 50));
if (ids.some((id) => residentOf(id)?.resident || !residentOf(id)?.idle_exits))
  throw new Error('a resident did not exit after its quiet period');
await new Promise((r) => setTimeout(r, AFTER_EXIT_MS));
const stillRunning = residents.filter((r) => existsSync(`/proc/${r.pid}`)).length;
const keeperAlone = sum((id) => pssKiB(keeperPid(id)));
out(
  `${SANDBOXES} idle sandboxes past the quiet period (${QUIET_S} s), PSS per sandbox: keeper ${keeperAlone.toFixed(1)} MiB, its anonymous ${sum((id) => anonKiB(keeperPid(id))).toFixed(1)} MiB; residents left running: ${stillRunning}, restarts: ${ids.reduce((n, id) => n + residentOf(id)!.restarts, 0)}; node ${process.version}`,
);

afterAll(async () => {
  for (const id of ids) await call('kill_sandbox', { sandbox_id: id });
  await client.close();
  rmSync(stateDir, { recursive: true, force: true });
});

describe('idle memory per sandbox', () => {
  bench('read PSS of the keepers', () => void ids.map((id) => pssKiB(keeperPid(id))), {
    iterations: 1,
  });
});
