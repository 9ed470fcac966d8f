// Descriptors the keeper inherited, covered before a sandbox could see them.
import { describe, expect, it } from 'vitest';
import { coverInherited } from '../../host/providers/local/system/inherited-fds.js';

describe('coverInherited', () => {
  it('puts /dev/null over inherited descriptors, never over our own pipes', () => {
    expect(coverInherited(['ignore', 'pipe', 'pipe', 'pipe'], { fds: [3, 6], devNullFd: 42 })).toEqual([
      'ignore',
      'pipe',
      'pipe',
      'pipe',
      'ignore',
      'ignore',
      42,
    ]);
    expect(coverInherited(['ignore', 'pipe', 'pipe', 'ignore'], { fds: [3], devNullFd: 42 })).toEqual(['ignore', 'pipe', 'pipe', 42]);
    expect(coverInherited(['ignore', 'pipe', 'pipe'])).toEqual(['ignore', 'pipe', 'pipe']);
  });
});
