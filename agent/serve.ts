// `agent.cjs serve [--idle-exit-s N]`: the resident agent. It answers request frames from its
// stdin on its stdout (shared/resident.ts), many at once, in any order: a `get` that waits never
// holds up the others. Locally the sandbox's keeper starts it and relays every server's connection
// to it; on e2b each server process runs its own. It stops at end-of-file on stdin, on SIGTERM, or
// after `--idle-exit-s` without a frame while no call waits on a command. Every command that must
// outlive it runs under a supervisor of its own from the start (resident-tasks.ts), so stopping
// it (or killing it) loses no task and no byte.
import { RESIDENT_IDLE_EXIT_MAX_S } from '../shared/limits.js';
import { PROTOCOL_VERSION, type AgentResponse } from '../shared/protocol.js';
import { lineSplitter } from '../shared/frame-lines.js';
import { asciiJson, ClientFrameSchema, type AbortReason, type ResidentFrame } from '../shared/resident.js';
import { handleRequest, helloResult, type RequestContext } from './call.js';
import { debug } from './errors.js';
import { closeInheritedFds } from './inherited-fds.js';
import { ResidentTasks } from './resident-tasks.js';
import { readTimings } from './timing.js';

/** A request in flight: aborting it tells its op why. */
type InFlight = AbortController;

/** Entry of `serve`; resolves never (the process exits when the resident stops). */
export async function runResident(args: string[]): Promise<void> {
  // Descriptors the launcher leaked would reach every command we start.
  closeInheritedFds();
  for (const sig of ['SIGHUP', 'SIGINT'] as const) process.on(sig, () => {});
  const idleExitMs = idleExitOf(args);
  // Read once: the variables are the resident's own, fixed when it started.
  const timings = readTimings(process.env);
  const services = new ResidentTasks(timings);
  const inFlight = new Map<number, InFlight>();
  let isStopping = false;

  const send = (frame: ResidentFrame): void => {
    if (!isStopping || frame.id !== 0) process.stdout.write(asciiJson(frame) + '\n');
  };
  process.stdout.on('error', () => stop());

  const stop = (): void => {
    if (isStopping) return;
    isStopping = true;
    for (const c of inFlight.values()) c.abort('disconnected' satisfies AbortReason);
    // Execs aborted above answer promptly (killed, or left running as tasks); then nothing is left to wait for.
    const exitWhenIdle = (): void => {
      if (inFlight.size === 0) process.exit(0);
      else setTimeout(exitWhenIdle, 20).unref();
    };
    exitWhenIdle();
    setTimeout(() => process.exit(0), 10_000).unref();
  };
  process.on('SIGTERM', stop);

  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    if (idleExitMs === null) return;
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => (inFlight.size === 0 && !services.isBusy ? stop() : armIdle()), idleExitMs);
  };

  const answer = (id: number, request: unknown): void => {
    if (inFlight.has(id)) return; // a repeated id: the first one's answer stands
    const controller = new AbortController();
    inFlight.set(id, controller);
    const after: (() => void)[] = [];
    const ctx: RequestContext = {
      timings,
      resident: services,
      signal: controller.signal,
      afterAnswer: (fn) => after.push(fn),
    };
    // handleRequest never rejects; the catch only keeps a broken promise from going unnoticed.
    handleRequest(request, ctx)
      .catch((): AgentResponse => ({
        protocol: PROTOCOL_VERSION,
        ok: false,
        error: { code: 'internal', message: 'the resident agent failed unexpectedly' },
      }))
      .then((response) => {
        inFlight.delete(id);
        send({ id, response });
        for (const fn of after) fn();
        armIdle();
      })
      .catch(() => stop());
  };

  const onLine = (line: Buffer): void => {
    armIdle();
    let frame: unknown;
    try {
      frame = JSON.parse(line.toString('utf8'));
    } catch {
      frame = undefined;
    }
    const parsed = ClientFrameSchema.safeParse(frame);
    if (!parsed.success) {
      // Not our protocol: whoever writes this is not a client to serve.
      debug('a frame outside the protocol: stopping');
      stop();
      return;
    }
    if ('request' in parsed.data) {
      services.noteRequest();
      answer(parsed.data.id, parsed.data.request);
    } else inFlight.get(parsed.data.id)?.abort(parsed.data.abort);
  };

  const ctx: RequestContext = { timings, resident: services };
  send({ id: 0, hello: { ...helloResult(ctx), pid: process.pid, resident: true, promotable: services.isPromotable } });
  process.stdin.on('data', lineSplitter(onLine, stop));
  process.stdin.on('end', stop);
  process.stdin.on('error', stop);
  armIdle();
  return new Promise(() => {});
}

function idleExitOf(args: string[]): number | null {
  const i = args.indexOf('--idle-exit-s');
  const s = i >= 0 ? Number(args[i + 1]) : NaN;
  return Number.isInteger(s) && s > 0 && s <= RESIDENT_IDLE_EXIT_MAX_S ? s * 1000 : null;
}
