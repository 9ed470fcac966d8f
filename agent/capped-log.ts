// One task stream on its way to disk: secrets masked first, then at most `capBytes` written.
// The cap counts bytes written (after masking); everything beyond is read and dropped so the
// command never blocks on a full pipe.
import { writeSync } from 'node:fs';
import { SecretMasker } from './secret-masker.js';

/** A log file that accepts at most `capBytes` and remembers whether anything was dropped. */
export class CappedLog {
  private written = 0;
  private dropped = false;
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

  /** True once any byte of output (masked) did not fit under the cap. */
  get isTruncated(): boolean {
    return this.dropped;
  }

  /** Takes `length` bytes of raw command output from `bytes`, whose memory may be reused once this returns. */
  push(bytes: Buffer, length: number = bytes.length): void {
    if (this.written >= this.capBytes) {
      // Full: nothing more can be written, so skip masking (and any allocation) and count the loss.
      if (length > 0) this.dropped = true;
      return;
    }
    this.masker.push(length === bytes.length ? bytes : bytes.subarray(0, length));
  }

  /** End of stream: writes what the masker held back (a partial secret is not a secret). */
  end(): void {
    if (this.written >= this.capBytes) {
      if (this.masker.pendingBytes > 0) this.dropped = true;
      return;
    }
    this.masker.flush();
  }

  private write(bytes: Buffer): void {
    const room = this.capBytes - this.written;
    const n = Math.min(room, bytes.length);
    if (n < bytes.length) this.dropped = true;
    let off = 0;
    while (off < n) off += writeSync(this.fd, bytes, off, n - off);
    this.written += n;
  }
}
