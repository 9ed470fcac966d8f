// The local provider's file scripts: their statuses as fixed categories, and listings parsed.
import { describe, expect, it } from 'vitest';
import { fileStatusError, FILE_STATUS, parseListing } from '../../host/providers/local/files/scripts.js';

describe('file helpers', () => {
  it('maps script statuses to fixed categories', () => {
    expect(fileStatusError(0)).toBeNull();
    expect(fileStatusError(FILE_STATUS.notFound)?.category).toBe('not_found');
    expect(fileStatusError(FILE_STATUS.isDirectory)?.category).toBe('invalid_argument');
    expect(fileStatusError(FILE_STATUS.permission)?.category).toBe('permission_denied');
    expect(fileStatusError(FILE_STATUS.noSpace)?.category).toBe('insufficient_resources');
    expect(fileStatusError(1)?.category).toBe('internal');
  });

  it('parses listings, including names with tabs', () => {
    const out = Buffer.from('d\t60\t1700000000.5\t/home/user/b\0f\t3\t1700000001.0\t/home/user/a\tb\0l\t4\tx\t/home/user/c\0');
    expect(parseListing(out)).toEqual([
      { name: 'a\tb', path: '/home/user/a\tb', type: 'file', size: 3, modified_at: '2023-11-14T22:13:21.000Z' },
      { name: 'b', path: '/home/user/b', type: 'directory', size: 60, modified_at: '2023-11-14T22:13:20.500Z' },
      { name: 'c', path: '/home/user/c', type: 'symlink', size: 4, modified_at: null },
    ]);
  });
});
