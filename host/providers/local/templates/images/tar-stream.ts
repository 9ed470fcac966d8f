// A tar reader for hostile archives (image layers): ustar, GNU long names and PAX headers, read
// from a byte stream one entry at a time. Each header's checksum is checked, every size bounded;
// what it cannot read as tar is refused rather than guessed at. Paths are returned as written:
// the caller (layer-stack.ts) decides what they may name.
import { ProviderError } from '../../../provider-error.js';

/** A tar block. */
export const TAR_BLOCK = 512;
const BLOCK = TAR_BLOCK;
/** A GNU long name or PAX header larger than this is refused (no real path is that long). */
const MAX_META_BYTES = 1 << 20;

/** What one tar member is. `other`: a device, a FIFO or a type this reader does not place. */
export type TarEntryType = 'file' | 'dir' | 'symlink' | 'hardlink' | 'other';

/** One member's header, with GNU long names and PAX values applied. */
export interface TarEntry {
  path: string;
  type: TarEntryType;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtimeS: number;
  linkname: string;
}

function notTar(detail: string): ProviderError {
  return new ProviderError('invalid_argument', { code: 'layer_not_tar', detail });
}

/** Reads exact byte counts from an async stream of chunks. */
export class ByteReader {
  private buf: Buffer = Buffer.alloc(0);
  private isDone = false;
  private readonly it: AsyncIterator<Buffer>;
  /** Bytes handed out so far: a member's offset in an uncompressed archive. */
  position = 0;

  constructor(chunks: AsyncIterable<Buffer>) {
    this.it = chunks[Symbol.asyncIterator]();
  }

  private async fill(n: number): Promise<void> {
    while (this.buf.length < n && !this.isDone) {
      const r = await this.it.next();
      if (r.done) this.isDone = true;
      else this.buf = this.buf.length === 0 ? r.value : Buffer.concat([this.buf, r.value]);
    }
  }

  /** Exactly `n` bytes, or null at a clean end (no byte left); throws when the stream ends inside them. */
  async read(n: number): Promise<Buffer | null> {
    await this.fill(n);
    if (this.buf.length === 0) return null;
    if (this.buf.length < n) throw notTar('A layer ends in the middle of a tar member: it is truncated.');
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    this.position += n;
    return out;
  }

  /** The next `n` bytes as they arrive. */
  async *take(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buf.length === 0) await this.fill(1);
      if (this.buf.length === 0) throw notTar('A layer ends in the middle of a tar member: it is truncated.');
      const k = Math.min(left, this.buf.length);
      const piece = this.buf.subarray(0, k);
      this.buf = this.buf.subarray(k);
      left -= k;
      this.position += k;
      yield piece;
    }
  }

  /** Reads and drops `n` bytes. */
  async skip(n: number): Promise<void> {
    for await (const _ of this.take(n)) void _;
  }

  /** Drops whatever is left (a compressed stream must be read to its end to be checked). */
  async drain(): Promise<void> {
    this.buf = Buffer.alloc(0);
    for (;;) {
      const r = await this.it.next();
      if (r.done) return;
    }
  }
}

function text(block: Buffer, start: number, len: number): string {
  const field = block.subarray(start, start + len);
  const end = field.indexOf(0);
  return field.subarray(0, end === -1 ? len : end).toString('utf8');
}

/** A numeric field: octal text, or GNU's base-256 (high bit set) for large values. */
function num(block: Buffer, start: number, len: number): number {
  const field = block.subarray(start, start + len);
  if ((field[0]! & 0x80) !== 0) {
    let v = field[0]! & 0x7f;
    for (let i = 1; i < len; i++) v = v * 256 + field[i]!;
    if (!Number.isSafeInteger(v)) throw notTar('A tar header holds a number too large to be real.');
    return v;
  }
  const s = text(block, start, len).trim();
  if (s === '') return 0;
  if (!/^[0-7]+$/.test(s)) throw notTar('A tar header has a numeric field that is not octal: the layer is not a tar archive.');
  return parseInt(s, 8);
}

function checksumOk(block: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : block[i]!;
  return sum === num(block, 148, 8);
}

/** PAX records (`<len> <key>=<value>\n`). */
function parsePax(data: Buffer): Map<string, string> {
  const out = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space === -1) break;
    const len = Number(data.subarray(at, space).toString('ascii'));
    if (!Number.isInteger(len) || len <= 0 || at + len > data.length) throw notTar('A PAX header is malformed.');
    const record = data.subarray(space + 1, at + len - 1).toString('utf8');
    const eq = record.indexOf('=');
    if (eq > 0) out.set(record.slice(0, eq), record.slice(eq + 1));
    at += len;
  }
  return out;
}

function typeOf(flag: string): TarEntryType {
  switch (flag) {
    case '0':
    case '\0':
    case '7':
    case '':
      return 'file';
    case '1':
      return 'hardlink';
    case '2':
      return 'symlink';
    case '5':
      return 'dir';
    default:
      return 'other';
  }
}

/** GNU long names and PAX values waiting for the member they belong to. */
export interface PendingMeta {
  longName?: string | undefined;
  longLink?: string | undefined;
  pax: Map<string, string>;
}

/** What one 512-byte header block is: the end, a meta header (its data to be read and given to `apply`) or a member. */
export type HeaderBlock =
  { kind: 'end' } | { kind: 'meta'; size: number; apply(data: Buffer): void } | { kind: 'entry'; entry: TarEntry; dataBytes: number };

/** Decodes a header block, consuming `pending` for a member. */
export function decodeHeader(block: Buffer, pending: PendingMeta): HeaderBlock {
  if (block.every((b) => b === 0)) return { kind: 'end' };
  if (!checksumOk(block)) throw notTar('A tar header fails its checksum: the layer is not a tar archive, or it is damaged.');
  const flag = String.fromCharCode(block[156]!);
  const size = num(block, 124, 12);
  if (flag === 'L' || flag === 'K' || flag === 'x' || flag === 'g') {
    if (size > MAX_META_BYTES) throw notTar('A tar member has a header too large to be real.');
    return {
      kind: 'meta',
      size,
      apply(data) {
        if (flag === 'L') pending.longName = text(data, 0, data.length);
        else if (flag === 'K') pending.longLink = text(data, 0, data.length);
        else if (flag === 'x') pending.pax = parsePax(data);
      },
    };
  }
  const isUstar = block.subarray(257, 263).toString('latin1') === 'ustar\0';
  const prefix = isUstar ? text(block, 345, 155) : '';
  const name = text(block, 0, 100);
  const { pax } = pending;
  const paxSize = pax.get('size');
  const entry: TarEntry = {
    path: pax.get('path') ?? pending.longName ?? (prefix ? `${prefix}/${name}` : name),
    type: typeOf(flag),
    mode: num(block, 100, 8),
    uid: pax.has('uid') ? Number(pax.get('uid')) : num(block, 108, 8),
    gid: pax.has('gid') ? Number(pax.get('gid')) : num(block, 116, 8),
    size: paxSize !== undefined ? Number(paxSize) : size,
    mtimeS: pax.has('mtime') ? Math.floor(Number(pax.get('mtime'))) : num(block, 136, 12),
    linkname: pax.get('linkpath') ?? pending.longLink ?? text(block, 157, 100),
  };
  pending.longName = pending.longLink = undefined;
  pending.pax = new Map();
  if (!Number.isSafeInteger(entry.size) || entry.size < 0 || !Number.isInteger(entry.uid) || !Number.isInteger(entry.gid)) {
    throw notTar('A tar member has a size or owner that is not a number.');
  }
  // Hard links, links and directories carry no data whatever their size field says.
  return { kind: 'entry', entry, dataBytes: entry.type === 'file' || entry.type === 'other' ? entry.size : 0 };
}

/** Bytes of padding after `n` bytes of member data. */
export function paddingAfter(n: number): number {
  return Math.ceil(n / BLOCK) * BLOCK - n;
}

/**
 * The members of the tar stream in `reader`, one at a time. For each, `body` yields its bytes;
 * what the caller does not read is skipped before the next member.
 */
export async function* readTar(reader: ByteReader): AsyncGenerator<{ entry: TarEntry; body: () => AsyncGenerator<Buffer> }> {
  const pending: PendingMeta = { pax: new Map() };
  for (;;) {
    const block = await reader.read(BLOCK);
    if (block === null) return;
    const header = decodeHeader(block, pending);
    if (header.kind === 'end') return;
    if (header.kind === 'meta') {
      const data = (await reader.read(header.size + paddingAfter(header.size))) ?? Buffer.alloc(0);
      header.apply(data.subarray(0, header.size));
      continue;
    }
    const { entry, dataBytes } = header;
    let isRead = false;
    const body = async function* (): AsyncGenerator<Buffer> {
      isRead = true;
      yield* reader.take(dataBytes);
    };
    yield { entry, body };
    if (!isRead) await reader.skip(dataBytes);
    await reader.skip(paddingAfter(dataBytes));
  }
}
