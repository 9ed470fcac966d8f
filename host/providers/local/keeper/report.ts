// The keeper's one-line JSON report to the provider that started it (on fd 3): ready, or a
// static failure code the provider maps to a ProviderError. No text of the system's crosses it.
import { closeSync, writeSync } from 'node:fs';

/**
 * Static failure codes the keeper reports to the provider (mapped to ProviderErrors there).
 * `keeper_failed`: a fault in the keeper itself, or told to stop before the sandbox was ready.
 * `network_failed`: the egress proxy could not be started. `root_mount_failed`: a template
 * sandbox's writable root could not be mounted. `ro_bind_missing`: a read-only host path the
 * server shows in sandboxes is gone. `userns_limit_failed`: nested user namespaces could not be
 * forbidden inside (limits/userns-limit.ts). `start_out_of_resources`: bwrap could not be spawned,
 * or could not fork or create its namespaces, or the netns helper not be started, for want of
 * processes or memory (EAGAIN, ENOMEM).
 */
export type KeeperFailure =
  | 'spec_invalid'
  | 'cgroup_unavailable'
  | 'tool_missing'
  | 'userns_refused'
  | 'userns_apparmor'
  | 'bwrap_failed'
  | 'start_out_of_resources'
  | 'start_timeout'
  | 'network_failed'
  | 'root_mount_failed'
  | 'ro_bind_missing'
  | 'userns_limit_failed'
  | 'keeper_failed';

/** The one line the keeper writes on fd 3. */
export type KeeperReport = { ok: true } | { ok: false; code: KeeperFailure };

/** A function that writes the first report it is given on `fd`, closes it, and ignores every later one. */
export function reportOnce(fd: number): (report: KeeperReport) => void {
  let isReported = false;
  return (report) => {
    if (isReported) return;
    isReported = true;
    try {
      writeSync(fd, JSON.stringify(report) + '\n');
      closeSync(fd);
    } catch {
      // The provider gave up waiting; the sandbox still lives until its deadline.
    }
  };
}
