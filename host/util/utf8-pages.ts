// Pages of a task's output are byte ranges decoded as UTF-8, so a character can be split at a
// page's end. Browser-safe (TextEncoder, no Buffer): the CLI's `logs`, the dashboard page and
// the MCP App view all read pages this way.

const encoder = new TextEncoder();

/**
 * Of a page decoded from `bytes` bytes, the text to show now and the bytes it covers: a
 * character split at the page's end (decoded as one U+FFFD) is held back for the next page,
 * unless nothing will follow (`isFinal`) or the page already holds invalid bytes (then the
 * byte count of the text no longer tells where the split is, and the page is shown as it is).
 */
export function completeCharacters(text: string, bytes: number, isFinal: boolean): { text: string; bytes: number } {
  if (isFinal || !text.endsWith('\uFFFD')) return { text, bytes };
  const head = text.slice(0, -1);
  if (head.includes('\uFFFD')) return { text, bytes };
  const headBytes = encoder.encode(head).length;
  const tail = bytes - headBytes;
  return tail >= 1 && tail <= 3 ? { text: head, bytes: headBytes } : { text, bytes };
}
