// Lines of the resident agent's transport (resident.ts), without the frames' schemas: the keeper
// relays lines and never parses a frame, so it imports this and loads no zod (about 4 MiB of
// memory per idle keeper, issue 21).

/** The longest frame either side accepts, newline included; a longer one ends the connection. */
export const MAX_FRAME_BYTES = 4 * 1024 * 1024;

/**
 * Splits a byte stream into lines of at most MAX_FRAME_BYTES; `onLine` gets each without its
 * newline, `onOverflow` once when a line grows past the bound (nothing is delivered after it).
 */
export function lineSplitter(onLine: (line: Buffer) => void, onOverflow: () => void, maxBytes = MAX_FRAME_BYTES): (chunk: Buffer) => void {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let isOverflowed = false;
  return (chunk) => {
    if (isOverflowed) return;
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (pendingBytes + piece.length >= maxBytes) {
        isOverflowed = true;
        onOverflow();
        return;
      }
      const line = pendingBytes > 0 ? Buffer.concat([...pending, piece]) : piece;
      pending = [];
      pendingBytes = 0;
      onLine(line);
      if (isOverflowed) return;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      pendingBytes += rest.length;
      if (pendingBytes >= maxBytes) {
        isOverflowed = true;
        onOverflow();
        return;
      }
      // The caller's buffer may be reused: keep a copy of a partial line.
      pending.push(Buffer.from(rest));
    }
  };
}
