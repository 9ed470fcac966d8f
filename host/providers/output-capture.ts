// Where a command's output streams go: each kept within a cap while the rest is read and dropped,
// so a command that writes without end never blocks on a full pipe nor grows our memory. The
// head-and-tail capture lives in shared/ (the resident agent captures exec output the same way).
import type { OutputSink } from '../../shared/output-capture.js';

export { OutputCapture, type OutputSink } from '../../shared/output-capture.js';

/** Keeps the first `capBytes` of a stream (file reads: a prefix is what a reader wants). */
export class HeadCapture implements OutputSink {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  isTruncated = false;

  constructor(private readonly capBytes: number) {}

  push(chunk: Buffer): void {
    const room = this.capBytes - this.size;
    if (room <= 0) {
      if (chunk.length > 0) this.isTruncated = true;
      return;
    }
    if (chunk.length > room) {
      this.chunks.push(chunk.subarray(0, room));
      this.size += room;
      this.isTruncated = true;
    } else {
      this.chunks.push(chunk);
      this.size += chunk.length;
    }
  }

  get data(): Buffer {
    return Buffer.concat(this.chunks, this.size);
  }

  /** Every kept byte is from the stream's start. */
  get splitAt(): number {
    return this.size;
  }
}
