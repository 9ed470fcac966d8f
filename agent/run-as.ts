// The ids a per-call agent's `start` runs the task's command as (RUN_AS_ENV, protocol minor 8: an
// image's user). The supervisor spawns the command with them: node sets them in the child before
// it execs (libuv: setgroups(0), setgid, setuid), so the command's first process is that user's
// from its first instruction, with none of root's capabilities, while the agent and the task's
// supervisor stay root of the sandbox (they own the task directories and logs).
import { realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { RUN_AS_ENV, RunAsSchema, type RunAsIds } from '../shared/protocol.js';
import { AgentFailure } from './errors.js';

/** Ids inside the sandbox (the protocol's run_as). */
export type RunAs = RunAsIds;

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
  // The same bounds as the request's field.
  const ids = m ? RunAsSchema.safeParse({ uid: Number(m[1]), gid: Number(m[2]) }) : undefined;
  if (!ids?.success) throw new AgentFailure('invalid_request', `${RUN_AS_ENV} must be UID:GID`);
  return { runAs: ids.data };
}

/** Spawn options for `runAs` (none: the supervisor's own ids). */
export function spawnIds(runAs: RunAs | undefined): { uid?: number; gid?: number } {
  return runAs ? { uid: runAs.uid, gid: runAs.gid } : {};
}

/**
 * True when a process with `runAs`'s ids (and no supplementary groups, none of root's
 * capabilities: how the command runs) may make `dir` its working directory: search permission on
 * every directory of its real path, and on each one the path names on the way (a symlink's
 * directory). By the mode bits alone (an ACL may say more): a false answer is a clear
 * `cwd_not_found` where the spawn would fail; a wrong true one fails the spawn, nothing else.
 */
export function mayEnter(dir: string, runAs: RunAs): boolean {
  if (runAs.uid === 0) return true;
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return false;
  }
  const seen = new Set<string>();
  for (const path of [real, dir]) {
    for (let p = path; !seen.has(p); p = dirname(p)) {
      seen.add(p);
      // The named path's own directories may be symlinks: those are followed (stat), as chdir does.
      if (!isSearchable(p, runAs)) return false;
      if (p === '/') break;
    }
  }
  return true;
}

function isSearchable(path: string, runAs: RunAs): boolean {
  let st;
  try {
    st = statSync(path);
  } catch {
    return false;
  }
  if (!st.isDirectory()) return false;
  const bits = st.uid === runAs.uid ? st.mode >> 6 : st.gid === runAs.gid ? st.mode >> 3 : st.mode;
  return (bits & 1) !== 0;
}
