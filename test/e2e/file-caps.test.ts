// The file tools' caps through the built server and a real client, on a real local sandbox:
// read_file returns at most 1 MiB and sets `truncated` beyond; write_file and upload_file take at
// most 3 MiB per call, refusing more as invalid_argument naming the field and writing nothing;
// list_files returns at most 1000 entries and sets `truncated` beyond. Each cap is checked at the
// limit and one past it.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { localServer, ok, toolError } from '../support/built-server.js';

const MIB = 1024 * 1024;
const s = localServer();

/** A fresh sandbox of this test's own. */
async function sandbox(): Promise<string> {
  return (await ok(s.client, 'create_sandbox', { timeout: 300 })).sandbox_id as string;
}

async function sh(sandboxId: string, command: string): Promise<string> {
  const r = await ok(s.client, 'run_command', { sandbox_id: sandboxId, command });
  expect(r.exit_code, command).toBe(0);
  return r.stdout as string;
}

/** `n` bytes of repeated `0123456789abcdef\n`, as `yes … | head -c n` writes them in the sandbox. */
function pattern(n: number): string {
  return '0123456789abcdef\n'.repeat(Math.ceil(n / 17)).slice(0, n);
}

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** The sha256 of a sandbox file, or 'missing'. */
async function fileHash(sandboxId: string, path: string): Promise<string> {
  return (await sh(sandboxId, `if [ -e ${path} ]; then sha256sum < ${path} | cut -d' ' -f1; else echo missing; fi`)).trim();
}

describe('read_file: at most 1 MiB, `truncated` beyond', () => {
  it('returns a file of exactly 1 MiB whole, and of 1 MiB + 10 bytes its first 1 MiB with truncated and the full size', async () => {
    const id = await sandbox();
    await sh(id, `yes 0123456789abcdef | head -c ${MIB} > exact.txt && yes 0123456789abcdef | head -c ${MIB + 10} > over.txt`);

    const exact = await ok(s.client, 'read_file', { sandbox_id: id, path: 'exact.txt' });
    expect(exact.truncated).toBe(false);
    expect(exact.size).toBe(MIB);
    expect(exact.content).toBe(pattern(MIB));

    const over = await ok(s.client, 'read_file', { sandbox_id: id, path: 'over.txt' });
    expect(over.truncated).toBe(true);
    expect(over.size).toBe(MIB + 10);
    expect(over.content).toBe(pattern(MIB));
    // What was left out is there for download_file to page to.
    const rest = await ok(s.client, 'download_file', { sandbox_id: id, path: 'over.txt', offset: MIB });
    expect(Buffer.from(rest.data_base64 as string, 'base64').toString('utf8')).toBe(pattern(MIB + 10).slice(MIB));
    expect(rest.eof).toBe(true);
  });
});

describe('write_file: at most 3 MiB per call', () => {
  it('writes exactly 3 MiB, and refuses 3 MiB + 1 (in characters or in UTF-8 bytes) as invalid_argument naming `content`, changing nothing', async () => {
    const id = await sandbox();
    const full = 'w'.repeat(3 * MIB);
    expect(await ok(s.client, 'write_file', { sandbox_id: id, path: 'full.txt', content: full })).toEqual({
      path: 'full.txt',
      bytes_written: 3 * MIB,
    });
    expect(await fileHash(id, 'full.txt')).toBe(sha256(full));

    await ok(s.client, 'write_file', { sandbox_id: id, path: 'kept.txt', content: 'original' });
    const keptHash = await fileHash(id, 'kept.txt');
    // One character too many; and few enough characters that are more than 3 MiB once encoded.
    const overChars = 'x'.repeat(3 * MIB + 1);
    const overBytes = 'é'.repeat(1.5 * MIB + 1);
    for (const content of [overChars, overBytes]) {
      for (const path of ['kept.txt', 'new/never.txt']) {
        const e = await toolError(s.client, 'write_file', { sandbox_id: id, path, content });
        expect(e.category).toBe('invalid_argument');
        expect(e.suggestion).toContain('`content`');
        expect(e.text).not.toContain(content.slice(0, 64));
      }
    }
    expect(await fileHash(id, 'kept.txt')).toBe(keptHash);
    expect(await fileHash(id, 'new')).toBe('missing');
  });
});

describe('upload_file: at most 3 MiB decoded per call', () => {
  it('uploads exactly 3 MiB, and refuses 3 MiB + 1 as invalid_argument naming `data_base64`, writing and appending nothing', async () => {
    const id = await sandbox();
    const full = Buffer.alloc(3 * MIB, 7);
    const up = await ok(s.client, 'upload_file', { sandbox_id: id, path: 'full.bin', data_base64: full.toString('base64') });
    expect(up).toMatchObject({ bytes_written: 3 * MIB, size: 3 * MIB, sha256: sha256(full) });
    expect(await fileHash(id, 'full.bin')).toBe(sha256(full));

    const over = Buffer.alloc(3 * MIB + 1, 9).toString('base64');
    for (const [path, append] of [
      ['full.bin', false],
      ['full.bin', true],
      ['new/never.bin', false],
    ] as const) {
      const e = await toolError(s.client, 'upload_file', { sandbox_id: id, path, data_base64: over, append });
      expect(e.category).toBe('invalid_argument');
      expect(e.suggestion).toContain('`data_base64`');
    }
    expect(await fileHash(id, 'full.bin')).toBe(sha256(full));
    expect(await fileHash(id, 'new')).toBe('missing');
  });
});

describe('list_files: at most 1000 entries, `truncated` beyond', () => {
  it('lists a directory of exactly 1000 entries whole, and of 1001 entries 1000 of them with truncated', async () => {
    const id = await sandbox();
    await sh(id, 'mkdir exact over && cd exact && touch $(seq -f e%04g 1 1000) && cd ../over && touch $(seq -f o%04g 1 1001)');

    const exact = await ok(s.client, 'list_files', { sandbox_id: id, path: 'exact' });
    expect(exact.truncated).toBe(false);
    expect(new Set((exact.entries as { name: string }[]).map((e) => e.name)).size).toBe(1000);

    const over = await ok(s.client, 'list_files', { sandbox_id: id, path: 'over' });
    expect(over.truncated).toBe(true);
    const names = (over.entries as { name: string }[]).map((e) => e.name);
    expect(names).toHaveLength(1000);
    expect(new Set(names).size).toBe(1000);
    for (const name of names) expect(name).toMatch(/^o\d{4}$/);
  });

  it('counts entries at every depth towards the cap', async () => {
    const id = await sandbox();
    // 11 directories of 100 files: 1111 entries at depth 2, 11 at depth 1.
    await sh(id, 'mkdir deep && cd deep && for d in $(seq -f d%02g 1 11); do mkdir $d && (cd $d && touch $(seq -f f%03g 1 100)); done');
    const shallow = await ok(s.client, 'list_files', { sandbox_id: id, path: 'deep' });
    expect(shallow.truncated).toBe(false);
    expect(shallow.entries).toHaveLength(11);
    const deep = await ok(s.client, 'list_files', { sandbox_id: id, path: 'deep', depth: 2 });
    expect(deep.truncated).toBe(true);
    expect(deep.entries).toHaveLength(1000);
  });
});
