// The ids a per-call agent's `start` runs the task's command as (RUN_AS_ENV, protocol minor 8: an
// image's user). The supervisor spawns the command with them: node sets them in the child before
// it execs (libuv: setgroups(0), setgid, setuid), so the command's first process is that user's
// from its first instruction, with none of root's capabilities, while the agent and the task's
// supervisor stay root of the sandbox (they own the task directories and logs).
import { RUN_AS_ENV } from '../shared/protocol.js';
import { AgentFailure } from './errors.js';

/** Ids inside the sandbox. */
export interface RunAs {
  uid: number;
  gid: number;
}

/**
 * The ids RUN_AS_ENV names, taken out of this process's environment (so that neither the
 * supervisor nor the command inherits it); none when it is unset. A value that is not `UID:GID`
 * is refused: the command must never run as root by mistake.
 */
export function takeRunAs(): { runAs?: RunAs } {
  const text = process.env[RUN_AS_ENV];
  delete process.env[RUN_AS_ENV];
  if (text === undefined) return {};
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(text);
  const [uid, gid] = m ? [Number(m[1]), Number(m[2])] : [NaN, NaN];
  if (!(uid < 0xffffffff && gid < 0xffffffff)) throw new AgentFailure('invalid_request', `${RUN_AS_ENV} must be UID:GID`);
  return { runAs: { uid, gid } };
}

/** Spawn options for `runAs` (none: the supervisor's own ids). */
export function spawnIds(runAs: RunAs | undefined): { uid?: number; gid?: number } {
  return runAs ? { uid: runAs.uid, gid: runAs.gid } : {};
}
