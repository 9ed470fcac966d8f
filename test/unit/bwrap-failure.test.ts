// Telling why bwrap failed to start a sandbox from its stderr.
import { describe, expect, it } from 'vitest';
import { classifyBwrapFailure } from '../../host/providers/local/keeper/bwrap-process.js';

describe('classifyBwrapFailure', () => {
  it('tells refused user namespaces from AppArmor and other failures', () => {
    expect(classifyBwrapFailure('bwrap: setting up uid map: Permission denied', 1)).toBe('userns_apparmor');
    expect(classifyBwrapFailure('bwrap: Creating new namespace failed: No space left on device', 1)).toBe('userns_refused');
    expect(classifyBwrapFailure('bwrap: No permissions to creating new namespace', 1)).toBe('userns_refused');
    expect(classifyBwrapFailure('', 125)).toBe('cgroup_unavailable');
    expect(classifyBwrapFailure("bwrap: Can't mount proc", 1)).toBe('bwrap_failed');
  });
});
