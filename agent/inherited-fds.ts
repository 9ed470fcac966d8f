// Descriptors a caller leaked to us. Node opens its own with O_CLOEXEC, so any descriptor above
// stderr without that flag came from whoever ran the agent.
import { closeSync, readdirSync, readFileSync } from 'node:fs';

/** O_CLOEXEC as /proc/<pid>/fdinfo prints file flags (octal). */
const O_CLOEXEC = 0o2000000;

/**
 * Closes every descriptor above stderr that was inherited without close-on-exec. Node opens its
 * own with O_CLOEXEC, so these can only come from whoever ran us; a detached supervisor (and its
 * command) must not keep a caller's pipe open, or the caller's exec waits for the task to end.
 * `keep`: one the caller passed on purpose (a warm supervisor's shell socket).
 */
export function closeInheritedFds(keep?: number): void {
  let fds: string[];
  try {
    fds = readdirSync('/proc/self/fd');
  } catch {
    return;
  }
  for (const name of fds) {
    const fd = Number(name);
    if (!Number.isSafeInteger(fd) || fd <= 2 || fd === keep) continue;
    let info: string;
    try {
      info = readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1');
    } catch {
      continue; // the listing's own descriptor, already closed
    }
    const flags = /^flags:\s*([0-7]+)/m.exec(info);
    if (!flags || (parseInt(flags[1]!, 8) & O_CLOEXEC) !== 0) continue;
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
  }
}
