// stop_processes for local sandboxes: ends, from the host, every process of a sandbox that is
// not part of a task — what run_command and run_code left running (`cmd &`, nohup, setsid), and
// commands still running. It is the way out when leftovers fill the sandbox's process limit:
// nothing has to start inside the sandbox, so a full process table cannot stop it. Kept: pid 1
// and its own sleep, every task supervisor with its task's process group, the resident agent, and
// the agent's calls in flight (a waiting get_task). The sandbox's processes are those of its pid namespace, and of
// pid namespaces nested in it (found through their parents), read from the host's /proc; every
// signal goes to a pid whose start time still matches.
import { readFileSync, readlinkSync } from 'node:fs';
import { nodeScriptArgs } from '../../../../shared/agent-runtime.js';
import { listPids } from '../../../../shared/proc-pids.js';
import { parseProcStat } from '../../../../shared/proc-stat.js';
import { isAlive, pidNamespace, signalIfAlive, type ProcIdentity } from '../system/proc.js';
import { PID1_STOPPED_SHELLS } from '../launch/bwrap-args.js';

/** One process of a sandbox, as the host sees it (host pids). */
export interface SandboxProcess {
  pid: number;
  ppid: number;
  pgid: number;
  startTime: string;
  argv: string[];
}

/** Timings of stopLeftovers; the defaults suit a person's processes. */
export interface StopOpts {
  /** How long the leftovers have to end after SIGTERM before SIGKILL. */
  graceMs?: number;
  /** Poll interval while waiting. */
  pollMs?: number;
  /** SIGKILL rounds at most (each also ends what the previous round's processes forked meanwhile). */
  killRounds?: number;
}

// pid 1's shell loop waits on one of these (bwrap-args.ts PID1_SCRIPT): it would only start another.
const PID1_WAITERS: readonly (readonly string[])[] = [['sleep', '86400'], ...PID1_STOPPED_SHELLS];

function readProcess(pid: number): SandboxProcess | null {
  try {
    const stat = parseProcStat(readFileSync(`/proc/${pid}/stat`, 'latin1'));
    if (!stat || stat.state === 'Z' || stat.state === 'X' || stat.state === 'x') return null;
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    return { pid, ppid: stat.ppid, pgid: stat.pgid, startTime: String(stat.startTime), argv };
  } catch {
    return null;
  }
}

/**
 * The live processes of the sandbox whose pid 1 is `pid1`, pid 1 excluded: those in its pid
 * namespace, and those in namespaces nested in it (their first process's parent is the sandbox's).
 */
export function sandboxProcesses(pid1: ProcIdentity): SandboxProcess[] {
  const ns = pidNamespace(pid1.pid);
  if (ns === null || !isAlive(pid1)) return [];
  const inside = new Map<number, SandboxProcess>();
  const elsewhere: SandboxProcess[] = [];
  // Unreadable /proc fails the call (it cannot say what runs), as reading it directly did.
  const pids = listPids();
  if (pids === null) throw new Error('/proc cannot be read');
  for (const pid of pids) {
    if (pid <= 1 || pid === pid1.pid) continue;
    let procNs: string;
    try {
      procNs = readlinkSync(`/proc/${pid}/ns/pid`);
    } catch {
      continue;
    }
    const p = readProcess(pid);
    if (!p) continue;
    if (procNs === ns) inside.set(pid, p);
    else elsewhere.push(p);
  }
  // Nested pid namespaces: whatever descends from a sandbox process (its init's parent is one).
  for (let isGrowing = true; isGrowing;) {
    isGrowing = false;
    for (const p of elsewhere) {
      if (!inside.has(p.pid) && (inside.has(p.ppid) || p.ppid === pid1.pid)) {
        inside.set(p.pid, p);
        isGrowing = true;
      }
    }
  }
  return [...inside.values()];
}

/**
 * True for the agent's processes: a task's supervisor, one of its calls, or the resident
 * (`node …/agent-….cjs supervise|call|serve …`, node run directly or on the agent runtime's
 * loader, node's own flags possibly first: the resident's --max-old-space-size=…).
 */
function agentRole(p: SandboxProcess): 'supervise' | 'call' | 'serve' | null {
  const args = nodeScriptArgs(p.argv);
  const at = args.findIndex((a) => /\/agent-[^/]*\.cjs$/.test(a));
  if (at < 0 || args.slice(0, at).some((a) => !a.startsWith('--'))) return null;
  const role = args[at + 1];
  return role === 'supervise' || role === 'call' || role === 'serve' ? role : null;
}

/**
 * Which of a sandbox's processes are leftovers to stop: all but the tasks (supervisors, and the
 * process groups their commands lead), the agent's calls in flight, and pid 1's own sleep.
 */
export function leftovers(procs: readonly SandboxProcess[], pid1Pid: number): SandboxProcess[] {
  const supervisors = new Set(procs.filter((p) => agentRole(p) === 'supervise').map((p) => p.pid));
  // A supervisor starts its task's command in a group of its own, led by that command.
  const taskGroups = new Set(procs.filter((p) => supervisors.has(p.ppid) && p.pgid === p.pid).map((p) => p.pid));
  return procs.filter(
    (p) =>
      agentRole(p) === null &&
      !taskGroups.has(p.pgid) &&
      !(p.ppid === pid1Pid && PID1_WAITERS.some((w) => p.argv.length === w.length && p.argv.every((a, i) => a === w[i]))),
  );
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function identityOf(p: SandboxProcess): ProcIdentity {
  return { pid: p.pid, startTime: p.startTime };
}

/**
 * Stops the leftovers of the sandbox whose pid 1 is `pid1`: SIGTERM (and SIGCONT, for stopped
 * ones), up to graceMs for them to end, then SIGKILL to whatever is left, new ones included, in
 * rounds until none is. Returns how many processes it signalled.
 */
export async function stopLeftovers(pid1: ProcIdentity, opts: StopOpts = {}): Promise<number> {
  const { graceMs = 1000, pollMs = 20, killRounds = 10 } = opts;
  const signalled = new Set<string>();
  const current = (): SandboxProcess[] => leftovers(sandboxProcesses(pid1), pid1.pid);
  const send = (procs: readonly SandboxProcess[], signal: NodeJS.Signals): void => {
    for (const p of procs) {
      if (signalIfAlive(identityOf(p), signal)) signalled.add(`${p.pid}:${p.startTime}`);
      if (signal === 'SIGTERM') signalIfAlive(identityOf(p), 'SIGCONT');
    }
  };
  send(current(), 'SIGTERM');
  for (const until = Date.now() + graceMs; Date.now() < until && current().length > 0;) await sleep(pollMs);
  for (let round = 0; round < killRounds; round++) {
    const left = current();
    if (left.length === 0) break;
    send(left, 'SIGKILL');
    await sleep(pollMs);
  }
  return signalled.size;
}
