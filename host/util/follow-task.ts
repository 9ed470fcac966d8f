// Following a task's output in a browser (the dashboard page, the MCP App view): both streams
// from byte 0, page by page, long-polling once everything is shown, until the task ended and
// every byte was read. Where the pages come from (a JSON endpoint, a tool call through the host)
// is the caller's `read`; what is shown is theirs too. Browser-safe.
import type { TaskView } from '../../shared/protocol.js';
import { completeCharacters } from './utf8-pages.js';

/** The two streams of a task, in the order they are shown. */
export const STREAMS = ['stdout', 'stderr'] as const;
export type Stream = (typeof STREAMS)[number];

/** One read: the offsets to read from, and how long the source may wait for news (0: answer at once). */
export interface PageAsk {
  stdout_offset: number;
  stderr_offset: number;
  wait: number;
}

/** Where pages come from and where they go. */
export interface FollowOpts {
  /** One page of both streams (a get_task result). */
  read(ask: PageAsk): Promise<TaskView>;
  /** Text to add at the end of a stream (never re-sent). */
  append(stream: Stream, text: string): void;
  /** Each view read, after its text was appended. */
  onView(view: TaskView): void;
  /** Seconds a read may wait once everything is shown. */
  waitS: number;
  /** True once the reader should stop (the caller aborts its own read too). */
  isStopped(): boolean;
}

/** Reads until the task ended and all of its output was shown; the last view, or null when stopped. */
export async function followTask(opts: FollowOpts): Promise<TaskView | null> {
  const offsets = { stdout: 0, stderr: 0 };
  let waitS = 0;
  while (!opts.isStopped()) {
    const view = await opts.read({ stdout_offset: offsets.stdout, stderr_offset: offsets.stderr, wait: waitS });
    if (opts.isStopped()) return null;
    let hasMore = false;
    let isSplitOnly = false;
    for (const s of STREAMS) {
      const next = view[`${s}_next_offset`];
      const size = view[`${s}_size`];
      const page = completeCharacters(view[s], next - offsets[s], view.state !== 'running' && next >= size);
      if (page.text) opts.append(s, page.text);
      offsets[s] += page.bytes;
      if (offsets[s] < size && page.bytes > 0) hasMore = true;
      else if (offsets[s] < size) isSplitOnly = true;
    }
    opts.onView(view);
    if (!hasMore && view.state !== 'running') return view;
    if (!hasMore && isSplitOnly) {
      // Only part of a character is there: wait (reading from the end) until the stream grows.
      await opts.read({ stdout_offset: view.stdout_size, stderr_offset: view.stderr_size, wait: opts.waitS });
      waitS = 0;
      continue;
    }
    waitS = hasMore ? 0 : opts.waitS;
  }
  return null;
}
