// Runs the BUILT agent as a resident (`node dist/agent.cjs serve`) in an agent world (see
// agent-world.ts) and talks to it the way a host does: request frames on its stdin, answers on its
// stdout, validated with the shared schemas.
import { spawn, type ChildProcess } from 'node:child_process';
import { ResponseSchema, type AgentRequestInput, type AgentResponse } from '../../shared/protocol.js';
import { lineSplitter } from '../../shared/frame-lines.js';
import { ResidentFrameSchema, type AbortReason, type ResidentHello } from '../../shared/resident.js';
import { agentEnv, type AgentWorld } from './agent-world.js';
import { AGENT_BUNDLE } from './paths.js';
import { waitFor } from './wait.js';

/** A resident agent process and a client of it. */
export interface Resident {
  process: ChildProcess;
  hello: ResidentHello;
  /** Sends one request; resolves with its answer (rejects if the resident goes away first). */
  request(request: AgentRequestInput | Record<string, unknown>): Promise<AgentResponse>;
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
    abort: (id, reason) => child.stdin!.write(JSON.stringify({ id, abort: reason }) + '\n'),
    async close() {
      child.stdin!.end();
      await exited;
    },
    exited,
  };
}
