// The kernel settings that switch user namespaces off for bubblewrap, read from /proc (cheap
// enough for every server start): two sysctls that disable them, and Ubuntu's AppArmor switch,
// which restricts them to programs whose profile allows `userns` (only a real try tells which).
import { readFileSync } from 'node:fs';

function readSysctl(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** True when Ubuntu's AppArmor restriction of unprivileged user namespaces is on (23.10+). */
export function isAppArmorRestrictingUserns(): boolean {
  return readSysctl('/proc/sys/kernel/apparmor_restrict_unprivileged_userns') === '1';
}

/** The fix when a sysctl turns user namespaces off altogether, else undefined. */
export function usernsSysctlFix(): string | undefined {
  if (readSysctl('/proc/sys/user/max_user_namespaces') === '0') {
    return 'user namespaces are disabled: sudo sysctl -w user.max_user_namespaces=10000 (persist it in /etc/sysctl.d/)';
  }
  if (readSysctl('/proc/sys/kernel/unprivileged_userns_clone') === '0') {
    return 'unprivileged user namespaces are off: sudo sysctl -w kernel.unprivileged_userns_clone=1 (persist it in /etc/sysctl.d/)';
  }
  return undefined;
}
