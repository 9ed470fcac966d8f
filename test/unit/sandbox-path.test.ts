// The provider contract's one path rule, as a pure function (test/providers/path-rule.test.ts
// shows both providers honour it on real sandboxes).
import { describe, expect, it } from 'vitest';
import { resolveSandboxPath, SANDBOX_HOME } from '../../host/providers/provider.js';

describe('resolveSandboxPath', () => {
  it.each([
    ['~', '/home/user'],
    ['~/', '/home/user'],
    ['~/x', '/home/user/x'],
    ['~//x', '/home/user/x'],
    ['~/a/../x', '/home/user/x'],
    ['~/../x', '/home/x'],
    ['x', '/home/user/x'],
    ['./x', '/home/user/x'],
    ['.', '/home/user'],
    ['a/b/', '/home/user/a/b'],
    ['../x', '/home/x'],
    ['../../../..', '/'],
    ['a/~', '/home/user/a/~'],
    ['a/~/x', '/home/user/a/~/x'],
    ['~user/x', '/home/user/~user/x'],
    ['/abs', '/abs'],
    ['/abs/./a/../b', '/abs/b'],
    ['/~/x', '/~/x'],
    ['/', '/'],
  ])('%s → %s', (input, expected) => {
    expect(resolveSandboxPath(input)).toBe(expected);
  });

  it('resolves against the one sandbox home', () => {
    expect(SANDBOX_HOME).toBe('/home/user');
    expect(resolveSandboxPath('~')).toBe(SANDBOX_HOME);
  });

  it('refuses a NUL byte as invalid_argument without echoing the path', () => {
    for (const p of ['a\0b', '~/\0', '/x\0']) {
      let caught: unknown;
      try {
        resolveSandboxPath(p);
      } catch (e) {
        caught = e;
      }
      expect(caught).toMatchObject({ category: 'invalid_argument' });
      expect((caught as Error).message).not.toContain(p);
    }
  });
});
