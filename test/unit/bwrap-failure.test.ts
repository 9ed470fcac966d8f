// Telling why bwrap failed to start a sandbox from its stderr, and reading the user's process limit.
import { describe, expect, it } from 'vitest';
import { classifyBwrapFailure } from '../../host/providers/local/keeper/bwrap-process.js';
import { machineTasks, processLimit } from '../../host/providers/local/system/user-processes.js';

describe('classifyBwrapFailure', () => {
  it('tells refused user namespaces from AppArmor and other failures', () => {
    expect(classifyBwrapFailure('bwrap: setting up uid map: Permission denied', 1)).toBe('userns_apparmor');
    expect(classifyBwrapFailure('bwrap: Creating new namespace failed: No space left on device', 1)).toBe('userns_refused');
    expect(classifyBwrapFailure('bwrap: No permissions to creating new namespace', 1)).toBe('userns_refused');
    expect(classifyBwrapFailure('', 125)).toBe('cgroup_unavailable');
    expect(classifyBwrapFailure("bwrap: Can't mount proc", 1)).toBe('bwrap_failed');
  });

  it('names a start out of processes or memory as that, not as refused namespaces (measured at RLIMIT_NPROC)', () => {
    // What bwrap 0.8 printed when its clone met the user's process limit.
    expect(classifyBwrapFailure('bwrap: Creating new namespace failed: Resource temporarily unavailable\n', 1)).toBe(
      'start_out_of_resources',
    );
    expect(classifyBwrapFailure("bwrap: Can't mount tmpfs on /newroot/tmp: Cannot allocate memory", 1)).toBe('start_out_of_resources');
    expect(classifyBwrapFailure('bwrap: Creating new namespace failed: No space left on device', 1)).toBe('userns_refused');
  });
});

describe('processLimit', () => {
  const limits = (soft: string) =>
    `Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax processes             ${soft}                96367                processes \nMax open files            1024                 4096                 files     \n`;
  it('reads the soft RLIMIT_NPROC from /proc/<pid>/limits; none when unlimited or unreadable', () => {
    expect(processLimit(limits('120'))).toBe(120);
    expect(processLimit(limits('unlimited'))).toBeNull();
    expect(processLimit(null)).toBeNull();
    expect(processLimit('garbage')).toBeNull();
  });
});

describe('machineTasks', () => {
  it("reads the machine's processes and threads from /proc/loadavg: at least this uid's; none when unreadable", () => {
    expect(machineTasks('0.20 0.18 0.12 1/80 11206\n')).toBe(80);
    expect(machineTasks(null)).toBeNull();
    expect(machineTasks('garbage')).toBeNull();
    // This kernel's own file reads as a count (this process alone has several threads).
    expect(machineTasks()).toBeGreaterThan(1);
  });
});
