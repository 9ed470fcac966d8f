// perl, which local sandboxes need: their keepers forbid user namespaces inside with a small perl
// helper, and template sandboxes are launched and entered by two more (launch/perl-helpers.ts). The
// check runs perl the way they do: with this machine's system call numbers, making one.
import { spawnSync } from 'node:child_process';
import { LOCAL_DETAILS } from '../../providers/local/errors.js';
import { isHelperArch, perlCommand } from '../../providers/local/launch/perl-helpers.js';
import { locateTool } from '../../providers/local/system/preflight.js';
import { fail, ok, type Check } from './check.js';

/** close(-1) must fail with EBADF: perl ran, and its syscall() reached the kernel by this table. */
const PROBE = 'my $r = syscall($SYS{close}, -1); exit(($r == -1 && $!{EBADF}) ? 0 : 1);';

/** Whether perl is here and makes system calls by the numbers the helpers use. */
export function checkPerl(): Check {
  if (!isHelperArch(process.arch))
    return fail('perl', `${process.arch} is not an architecture the helpers know`, LOCAL_DETAILS.archUnsupported);
  const perl = locateTool('perl', {});
  if (!perl) return fail('perl', 'perl is not installed: sandboxes cannot start without their helpers', LOCAL_DETAILS.perlMissing);
  const cmd = perlCommand(perl, PROBE, process.arch, []);
  const r = spawnSync(cmd.file, cmd.args, { timeout: 10_000, env: { PATH: '/usr/bin:/bin' }, stdio: 'ignore' });
  if (r.status !== 0) return fail('perl', `perl at ${perl} could not make a system call`, LOCAL_DETAILS.perlMissing);
  return ok('perl', `perl at ${perl} (the sandboxes' helpers)`);
}
