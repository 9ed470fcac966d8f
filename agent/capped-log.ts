// One task stream on its way to disk: secrets masked first, then at most `capBytes` written.
// The cap counts bytes written (after masking); everything beyond is read and dropped so the
// command never blocks on a full pipe. A write the filesystem refuses (ENOSPC, say) ends the log
// there the same way: the stream is truncated, never the command stopped.
import { writeSync } from 'node:fs';
import { SecretMasker } from './secret-masker.js';

/** A log file that accepts at most `capBytes` and remembers whether anything was dropped. */
export class CappedLog {
  private written = 0;
  private hasDropped = false;
  private failedWith: string | null = null;
  private readonly masker: SecretMasker;

  constructor(
    private readonly fd: number,
    private readonly capBytes: number,
    secrets: readonly string[],
  ) {
    this.masker = new SecretMasker(secrets, (bytes) => this.write(bytes));
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
    if (this.isClosedForWrites) {
      // Full: nothing more can be written, so skip masking (and any allocation) and count the loss.
      if (length > 0) this.hasDropped = true;
      return;
    }
    this.masker.push(length === bytes.length ? bytes : bytes.subarray(0, length));
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
