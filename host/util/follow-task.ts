// Following a task's output in a browser (the dashboard page, the MCP App view): both streams
// from byte 0, page by page, long-polling once everything is shown, until the task ended and
// every byte was read. Where the pages come from (a JSON endpoint, a tool call through the host)
// is the caller's `read`; what is shown is theirs too. A capped stream's last bytes (get_task's
// `*_tail`, on the page that reaches the end of its log once the task ended) come after its log,
// across a gap of unknown size. Browser-safe.
import { LIMITS } from '../../shared/limits.js';
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
  /** A capped stream's last bytes, once, after all of its log was appended (see TAIL_GAP_TEXT). */
  appendTail(stream: Stream, tail: string): void;
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
  // Every page that reaches the end of an ended task's capped log carries its tail: shown once.
  const isTailShown = { stdout: false, stderr: false };
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
      const tail = view[`${s}_tail`];
      if (tail !== undefined && !isTailShown[s]) {
        opts.appendTail(s, tail);
        isTailShown[s] = true;
      }
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

/** The stream cap for people ("1 MiB"). */
export const CAP_TEXT = `${LIMITS.streamCapBytes / (1024 * 1024)} MiB`;
/** The most of a capped stream's end that is kept, for people ("32 KiB"). */
export const TAIL_TEXT = `${LIMITS.streamTailBytes / 1024} KiB`;

/**
 * The marker between a capped stream's log and its tail. Only "more than the cap" is known of the
 * stream's size (a view carries the log's size), so the gap is never given a number.
 */
export const TAIL_GAP_TEXT = `⋯ gap: this stream was more than ${CAP_TEXT}; the bytes between its first ${CAP_TEXT} and its last ${TAIL_TEXT} were not kept (how many is not known) ⋯`;
/** Why the tail may repeat bytes shown above the gap: the kept end starts with the read that filled the log. */
export const TAIL_GAP_TITLE = `A stream only a little over ${CAP_TEXT} may show here again some of the end of its first ${CAP_TEXT}.`;

/** What follows a stream's size: where its log was cut and whether (or when) its end is shown; '' for a stream that fits. */
export function cutNote(view: TaskView, stream: Stream, isTailShown: boolean): string {
  if (!view[`${stream}_truncated`]) return '';
  const cut = ` — cut at the ${CAP_TEXT} cap`;
  if (isTailShown) return `${cut}; the stream's last ${TAIL_TEXT} are shown after the gap`;
  if (view.state === 'running') return `${cut}; the stream's last ${TAIL_TEXT} are shown once the task has ended`;
  // Ended, and this page reached the log's end without a tail: the supervisor could not keep one.
  if (view[`${stream}_next_offset`] >= view[`${stream}_size`]) return `${cut}: the rest was not kept`;
  return `${cut}; the stream's last ${TAIL_TEXT} come with the page that reaches the end of the log`;
}
