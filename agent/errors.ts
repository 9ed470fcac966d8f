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
