// One task stream on its way to disk: secrets masked first, then at most `capBytes` written.
// The cap counts bytes written (after masking); everything beyond is read and dropped so the
// command never blocks on a full pipe. A write the filesystem refuses (ENOSPC, say) ends the log
// there the same way: the stream is truncated, never the command stopped.
// Of what is dropped, the last bytes are kept in memory (raw: they are masked once the stream has
// ended, see maskStreamEnd), so that a result can show how the output ended: from the read that
// closed the log on, whatever the supervisor reads itself and whatever a helper that drained the
// rest hands back (keepRest).
import { writeSync } from 'node:fs';
import { longestSecretBytes, maskStreamEnd, SecretMasker } from './secret-masker.js';

/** A log file that accepts at most `capBytes` and remembers whether anything was dropped. */
export class CappedLog {
  private written = 0;
  private hasDropped = false;
  private failedWith: string | null = null;
  private readonly masker: SecretMasker;
  /** The last raw bytes of the stream from the read that closed the log on, oldest first. */
  private rest: Buffer[] = [];
  private restBytes = 0;
  /** Set when some of the stream's end could not be kept (a helper failed or was stopped). */
  private isRestLost = false;
  /** How many raw bytes to keep: the tail a result needs, plus what masking its start may drop. */
  readonly restKeepBytes: number;

  constructor(
    private readonly fd: number,
    private readonly capBytes: number,
    private readonly secrets: readonly string[],
    private readonly tailBytes: number = 0,
  ) {
    this.masker = new SecretMasker(secrets, (bytes) => this.write(bytes));
    this.restKeepBytes = tailBytes === 0 ? 0 : tailBytes + 2 * longestSecretBytes(secrets);
  }

  /** Bytes written to the file so far. */
  get size(): number {
    return this.written;
  }

  /** True once any byte of output (masked) did not fit under the cap, or could not be written. */
  get isTruncated(): boolean {
    return this.hasDropped;
  }

  /** The error code of the write that ended the log early (e.g. `ENOSPC`); null while writes succeed. */
  get writeError(): string | null {
    return this.failedWith;
  }

  private get isClosedForWrites(): boolean {
    return this.written >= this.capBytes || this.failedWith !== null;
  }

  /** Takes `length` bytes of raw command output from `bytes`, whose memory may be reused once this returns. */
  push(bytes: Buffer, length: number = bytes.length): void {
    const chunk = length === bytes.length ? bytes : bytes.subarray(0, length);
    if (this.isClosedForWrites) {
      // Full: nothing more can be written, so skip masking and count the loss; only the end is kept.
      if (length > 0) this.hasDropped = true;
      this.keepRest(chunk);
      return;
    }
    this.masker.push(chunk);
    // The read that filled the log is kept whole: its dropped part is where the rest begins.
    if (this.isClosedForWrites) this.keepRest(chunk);
  }

  /** Adds raw bytes that follow those kept so far (copied: `bytes` may be reused); only the last restKeepBytes stay. */
  keepRest(bytes: Buffer): void {
    const keep = this.restKeepBytes;
    if (keep === 0 || bytes.length === 0) return;
    const piece = Buffer.from(bytes.length > keep ? bytes.subarray(bytes.length - keep) : bytes);
    this.rest.push(piece);
    this.restBytes += piece.length;
    while (this.restBytes - this.rest[0]!.length >= keep) this.restBytes -= this.rest.shift()!.length;
  }

  /** Some of the stream's last bytes never reached keepRest: there is no true tail to show. */
  loseRest(): void {
    this.isRestLost = true;
  }

  /**
   * After end(): the stream's last (at most tailBytes) bytes, masked, when the log was capped and
   * they were all kept; null otherwise (nothing was dropped, or the end is not known).
   */
  maskedTail(): Buffer | null {
    if (!this.hasDropped || this.isRestLost || this.restKeepBytes === 0 || this.restBytes === 0) return null;
    const raw = Buffer.concat(this.rest);
    return maskStreamEnd(this.secrets, raw.subarray(Math.max(0, raw.length - this.restKeepBytes)), this.tailBytes);
  }

  /** End of stream: writes what the masker held back (a partial secret is not a secret). */
  end(): void {
    if (this.isClosedForWrites) {
      if (this.masker.pendingBytes > 0) this.hasDropped = true;
      return;
    }
    this.masker.flush();
  }

  private write(bytes: Buffer): void {
    if (this.failedWith !== null) {
      if (bytes.length > 0) this.hasDropped = true;
      return;
    }
    const room = this.capBytes - this.written;
    const n = Math.min(room, bytes.length);
    if (n < bytes.length) this.hasDropped = true;
    let off = 0;
    try {
      while (off < n) off += writeSync(this.fd, bytes, off, n - off);
    } catch (err) {
      // Whatever part of the file was written stays; no later byte may land after a gap.
      this.failedWith = (err as NodeJS.ErrnoException).code ?? 'EIO';
      this.hasDropped = true;
    } finally {
      this.written += off;
    }
  }
}
