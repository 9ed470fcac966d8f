// One task stream on its way to disk: secrets masked first, then at most `capBytes` written.
// The cap counts bytes written (after masking); everything beyond is read and dropped so the
// command never blocks on a full pipe. A write the filesystem refuses (ENOSPC, say) ends the log
// there the same way: the stream is truncated, never the command stopped.
import { writeSync } from 'node:fs';
import { SECRET_MARKER } from '../shared/limits.js';
import { SecretMasker, type MaskerState } from './secret-masker.js';

/** Where a log that another process began goes on from: its size, whether it dropped bytes, the masker's hold. */
export interface LogResume {
  writtenBytes: number;
  isTruncated: boolean;
  masker?: MaskerState;
}

/** A log file that accepts at most `capBytes` and remembers whether anything was dropped. */
export class CappedLog {
  private written = 0;
  private hasDropped = false;
  private failedWith: string | null = null;
  /** Resumed after the first process stopped writing (full, or a failed write): no byte may follow the gap. */
  private isResumedClosed = false;
  private readonly masker: SecretMasker;

  /** `fd` writes at the end of what `resume` describes (open it for appending), or from 0 for a new log. */
  constructor(
    private readonly fd: number,
    private readonly capBytes: number,
    secrets: readonly string[],
    resume?: LogResume,
  ) {
    this.masker = new SecretMasker(secrets, (bytes) => this.write(bytes), SECRET_MARKER, resume?.masker);
    if (resume) {
      this.written = resume.writtenBytes;
      this.hasDropped = resume.isTruncated;
      this.isResumedClosed = resume.isTruncated;
    }
  }

  /** What the masker holds back (saved so that another process can go on with this log). */
  get maskerState(): MaskerState {
    return this.masker.state;
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
    return this.written >= this.capBytes || this.failedWith !== null || this.isResumedClosed;
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
    if (this.failedWith !== null || this.isResumedClosed) {
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
