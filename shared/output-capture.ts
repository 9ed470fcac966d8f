// Head-and-tail capture of one output stream, used by the providers (exec) and the resident agent
// (its exec op), so that both cap a command's output the same way.

/** A stream's bytes kept within a cap; the same face whichever bytes are kept. */
export interface OutputSink {
  /** Adds a chunk; never blocks and never grows beyond the cap. */
  push(chunk: Buffer): void;
  /** True when bytes were dropped. */
  readonly isTruncated: boolean;
  /** The kept bytes. */
  readonly data: Buffer;
  /** How many leading bytes of `data` are the stream's first bytes (where an "omitted" marker belongs). */
  readonly splitAt: number;
}

/**
 * Captures a stream's bytes up to a cap while draining the rest, keeping the first half and
 * the last half of the cap so a caller sees both how output began and how it ended (errors
 * usually come last). Providers use it for exec output.
 */
export class OutputCapture implements OutputSink {
  private readonly headCap: number;
  private readonly tailCap: number;
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  // The tail is a list of recent chunks trimmed from the front; cheap because chunks are large.
  private tail: Buffer[] = [];
  private tailBytes = 0;
  /** Every byte seen, kept or not. */
  totalBytes = 0;

  /** `capBytes` is the most a result may hold: its first half from the start, its second from the end. */
  constructor(capBytes: number) {
    this.headCap = Math.ceil(capBytes / 2);
    this.tailCap = capBytes - this.headCap;
  }

  /** Adds a chunk; never blocks and never grows beyond the cap. */
  push(chunk: Buffer): void {
    this.totalBytes += chunk.length;
    let rest = chunk;
    if (this.headBytes < this.headCap) {
      const take = Math.min(this.headCap - this.headBytes, rest.length);
      this.head.push(rest.subarray(0, take));
      this.headBytes += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0 || this.tailCap === 0) return;
    this.tail.push(rest.length > this.tailCap ? Buffer.from(rest.subarray(rest.length - this.tailCap)) : rest);
    this.tailBytes += Math.min(rest.length, this.tailCap);
    while (this.tailBytes > this.tailCap && this.tail.length > 0) {
      const first = this.tail[0]!;
      const excess = this.tailBytes - this.tailCap;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailBytes -= first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailBytes -= excess;
      }
    }
  }

  /** True when bytes were dropped between the head and the tail. */
  get isTruncated(): boolean {
    return this.totalBytes > this.headBytes + this.tailBytes;
  }

  /** The kept bytes: the whole output when it fit, else head + tail (split at `headBytes`). */
  get data(): Buffer {
    return Buffer.concat([...this.head, ...this.tail]);
  }

  /**
   * How many leading bytes of `data` are the stream's first bytes: all of them when nothing was
   * dropped, else where the head ends (the place a "bytes omitted" marker belongs).
   */
  get splitAt(): number {
    return this.isTruncated ? this.headBytes : this.headBytes + this.tailBytes;
  }
}
