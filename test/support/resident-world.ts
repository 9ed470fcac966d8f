// Runs the BUILT agent as a resident (`node dist/agent.cjs serve`) in an agent world (see
// agent-world.ts) and talks to it the way a host does: request frames on its stdin, answers on its
// stdout, validated with the shared schemas.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import {
  ExecResultSchema,
  ResponseSchema,
  TaskViewSchema,
  type AgentRequestInput,
  type AgentResponse,
  type ExecResult,
  type TaskView,
} from '../../shared/protocol.js';
import { lineSplitter } from '../../shared/frame-lines.js';
import { ResidentFrameSchema, type AbortReason, type ResidentHello } from '../../shared/resident.js';
import { agentEnv, resultOf, type AgentWorld } from './agent-world.js';
import { AGENT_BUNDLE } from './paths.js';
import { ppidOf, runningWith } from './processes.js';
import { waitFor } from './wait.js';

/** A resident agent process and a client of it. */
export interface Resident {
  process: ChildProcess;
  hello: ResidentHello;
  /** Sends one request; resolves with its answer (rejects if the resident goes away first). */
  request(request: AgentRequestInput | Record<string, unknown>): Promise<AgentResponse>;
  /** Sends a start/get/cancel request and returns its validated task view (fails on an error answer), as callView does. */
  requestView(request: AgentRequestInput): Promise<TaskView>;
  /** Sends an exec request and returns its validated result, finished or promoted (fails on an error answer). */
  requestExec(request: AgentRequestInput): Promise<ExecResult>;
  /** Sends a request and returns its id and the answer's promise (for abort). */
  send(request: AgentRequestInput | Record<string, unknown>): { id: number; answer: Promise<AgentResponse> };
  abort(id: number, reason: AbortReason): void;
  /** Closes its stdin (it hands its commands over and exits) and waits for it to exit. */
  close(): Promise<void>;
  /** Resolves once the process has exited. */
  exited: Promise<void>;
}

/** Starts a resident in `world` (with `extraEnv`) and waits for its greeting. */
export async function startResident(world: AgentWorld, extraEnv: Record<string, string> = {}): Promise<Resident> {
  const child = spawn(process.execPath, [AGENT_BUNDLE, 'serve'], { env: agentEnv(world, extraEnv), stdio: ['pipe', 'pipe', 'inherit'] });
  const waiting = new Map<number, { resolve: (r: AgentResponse) => void; reject: (e: Error) => void }>();
  let hello: ResidentHello | undefined;
  let nextId = 0;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.once('exit', () => {
    for (const w of waiting.values()) w.reject(new Error('the resident exited'));
    waiting.clear();
  });
  child.stdout!.on(
    'data',
    lineSplitter(
      (line) => {
        const frame = ResidentFrameSchema.parse(JSON.parse(line.toString('utf8')));
        if ('hello' in frame) hello = frame.hello;
        else {
          waiting.get(frame.id)?.resolve(ResponseSchema.parse(frame.response));
          waiting.delete(frame.id);
        }
      },
      () => child.kill('SIGKILL'),
    ),
  );
  child.stdin!.on('error', () => {});
  await waitFor(() => hello, 'the resident greeting');
  const send: Resident['send'] = (request) => {
    const id = ++nextId;
    const answer = new Promise<AgentResponse>((resolve, reject) => waiting.set(id, { resolve, reject }));
    child.stdin!.write(JSON.stringify({ id, request }) + '\n');
    return { id, answer };
  };
  return {
    process: child,
    hello: hello!,
    send,
    request: (request) => send(request).answer,
    requestView: async (request) => TaskViewSchema.parse(resultOf(await send(request).answer)),
    requestExec: async (request) => ExecResultSchema.parse(resultOf(await send(request).answer)),
    abort: (id, reason) => child.stdin!.write(JSON.stringify({ id, abort: reason }) + '\n'),
    async close() {
      child.stdin!.end();
      await exited;
    },
    exited,
  };
}

/** The resident's supervisors that take tasks from it: its children running `supervise --warm`. */
export function warmSupervisorsOf(r: Resident): number[] {
  return runningWith((argv) => argv.includes('supervise') && argv.includes('--warm')).filter((pid) => ppidOf(pid) === r.process.pid);
}

/** True when a warm supervisor is back from its task (out of the task's directory): it waits for the next. */
export function isWaitingForTask(supervisor: number): boolean {
  try {
    return readlinkSync(`/proc/${supervisor}/cwd`) === '/';
  } catch {
    return false;
  }
}

/** The first process a booted supervisor started ahead: its child running the task shell (`sh -c … sandbox-task`). */
export function pendingShellOf(supervisor: number): number | undefined {
  return runningWith((argv) => argv.includes('sandbox-task')).find((pid) => ppidOf(pid) === supervisor);
}

/** read(2)'s number in /proc/<pid>/syscall. */
const READ_SYSCALL: Partial<Record<NodeJS.Architecture, number>> = { x64: 0, arm64: 63 };

/**
 * The first process `supervisor` started ahead, once the resident knows of it (the condition for
 * giving it a start of its shape): the supervisor has said `ready <pid>` on the shell's socket and
 * the resident has read it. A shell that merely exists (pendingShellOf) may not have been told yet,
 * and a start that comes first is rightly given a fresh process. Seen from outside: the shell
 * runs, the supervisor is back in read(2) on its stdin (it writes the line right after the
 * shell's spawn, and its only other read of stdin, the expectation, comes before the spawn), and
 * nothing is queued at the resident's end of that socket (`ss`: the resident's handler runs in
 * the same turn as its read of the line, before any later request).
 */
export function toldShellOf(supervisor: number): number | undefined {
  const pending = pendingShellOf(supervisor);
  if (pending === undefined) return undefined;
  const read = READ_SYSCALL[process.arch];
  if (read === undefined) throw new Error(`no read(2) number known for ${process.arch}`);
  let socket: string | undefined;
  try {
    const [nr, fd] = readFileSync(`/proc/${supervisor}/syscall`, 'utf8').split(' ');
    if (Number(nr) !== read || Number(fd) !== 0) return undefined;
    // Its fd 3: the socket the shell reads its stdin from (the shell's fd 0 is the same end).
    socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${supervisor}/fd/3`))?.[1];
  } catch {
    return undefined;
  }
  if (socket === undefined) return undefined;
  // `u_str ESTAB <recv-q> <send-q> * <inode> * <peer inode>`: the resident's end is the one whose peer is ours.
  const residentEnd = execFileSync('ss', ['-xn'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .find((cols) => cols[0] === 'u_str' && cols[7] === socket);
  return residentEnd?.[2] === '0' ? pending : undefined;
}
