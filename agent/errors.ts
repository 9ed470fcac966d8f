// Failures an agent operation reports as `ok:false` with a fixed code.
import type { AgentErrorCode } from '../shared/protocol.js';

/** Thrown by an operation to answer `{ok:false, error:{code, message}}`; the message must not echo inputs. */
export class AgentFailure extends Error {
  constructor(
    readonly code: AgentErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Writes a diagnostic line to stderr when AGENT_DEBUG is set; stdout belongs to the protocol. */
export function debug(message: string): void {
  if (process.env.AGENT_DEBUG) process.stderr.write(`[sandbox-agent ${process.pid}] ${message}\n`);
}

/** An errno saying a spawn found no process or memory to take (EAGAIN: a process limit; ENOMEM). */
export function isOutOfProcesses(code: string | undefined): boolean {
  return code === 'EAGAIN' || code === 'ENOMEM';
}

/** A task error's code for a spawn (of its supervisor or its command) that failed with `errno`. */
export function spawnErrorCode(errno: string | undefined): 'out_of_processes' | 'spawn_failed' {
  return isOutOfProcesses(errno) ? 'out_of_processes' : 'spawn_failed';
}
