// No user namespaces inside a sandbox: a command that could make one could mount a tmpfs of its own
// past the disk budget (measured: 128 MiB written against a 64 MiB budget) and would reach the
// kernel's whole user-namespace surface. bubblewrap's --disable-userns is no way here (it nests the
// sandbox in a second user namespace, which nsenter then cannot enter: `reassociate to namespace
// 'ns/ipc' failed`). Instead the keeper sets the sandbox's own user namespace's
// max_user_namespaces to 0 before any command enters (helpers/userns-off.pl): it holds for
// everything inside, pid 1's orphans included, and nothing inside may raise it (no
// CAP_SYS_RESOURCE there; a template sandbox's /proc/sys is read-only as well).
import { execFile } from 'node:child_process';
import type { HelperScript } from '../launch/command-lines.js';
import { perlCommand } from '../launch/perl-helpers.js';

const WRITE_TIMEOUT_MS = 10_000;

/**
 * Forbids new user namespaces in the user namespace of `pid1` (a pid the caller verified), as
 * this process's uid; resolves true once it holds, false when it could not be set. Never rejects.
 */
export function forbidUserNamespaces(perl: string, helper: HelperScript, pid1: number): Promise<boolean> {
  const cmd = perlCommand(perl, helper.text, helper.arch, [String(pid1)]);
  return new Promise((resolve) => {
    execFile(cmd.file, cmd.args, { timeout: WRITE_TIMEOUT_MS, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }, (err) => resolve(!err));
  });
}
