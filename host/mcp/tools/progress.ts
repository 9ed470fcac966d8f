// Progress while a call runs: when the client sent a progress token, a long call reports every
// interval (default 10 s), so clients that reset their request timeout on progress keep it
// alive. `progress` is the elapsed time in seconds (strictly increasing); the message holds
// only durations and byte counts, never output, arguments or secrets. No token: nothing is sent.
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { ProgressNotifier, ToolContext } from './tool.js';

/** How often a call reports progress unless the server is configured otherwise. */
export const PROGRESS_INTERVAL_DEFAULT_MS = 10_000;

/** Runs `work`, reporting `describe(elapsed seconds)` every interval meanwhile if the caller asked for progress. */
export async function withProgress<T>(ctx: ToolContext, describe: (elapsedS: number) => string, work: () => Promise<T>): Promise<T> {
  const notify = ctx.progress;
  if (!notify) return work();
  const startedMs = Date.now();
  let last = 0;
  let sending: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    const elapsedS = Math.floor((Date.now() - startedMs) / 1000);
    last = Math.max(last + 1, elapsedS);
    sending = notify(last, describe(elapsedS));
  }, ctx.deps.config.progressIntervalMs ?? PROGRESS_INTERVAL_DEFAULT_MS);
  timer.unref();
  try {
    return await work();
  } finally {
    clearInterval(timer);
    // A notification the timer just sent goes out before the result: after it, a client has
    // dropped the call's progress handler and would see a notification for no call.
    await sending;
  }
}

/** "1234 bytes of stdout and 0 of stderr so far", for messages about a command's output. */
export function describeBytes(stdoutBytes: number, stderrBytes: number): string {
  return `${stdoutBytes} bytes of stdout and ${stderrBytes} of stderr so far`;
}

/** Sends notifications/progress on the request's own stream, if the client sent a progress token. */
export function progressNotifier(extra: RequestHandlerExtra<ServerRequest, ServerNotification>): ProgressNotifier | undefined {
  const progressToken = extra._meta?.progressToken;
  if (progressToken === undefined) return undefined;
  // A client gone meanwhile is no failure of the call.
  return (progress, message) =>
    extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message } }).catch(() => undefined);
}
