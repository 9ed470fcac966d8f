// The keeper's start-up garbage, collected once. V8 starts its memory reducer (the collections
// that give an idle process's pages back) only once the old generation has grown 1 MiB past its
// size after bootstrap, before any full collection. A keeper on Node 24 or 26 never grows that
// much: it runs no full collection at all, and keeps what its start left (old-space garbage, pages
// V8 12 and later keep pooled) for the sandbox's whole life; on Node 22 the reducer's round comes
// some 8 s after the start. So, where node was started with `--expose-gc` (V8 12 and later:
// node-flags.ts keeperCollectionFlags), the keeper runs one collection that gives pages back a few
// seconds after the sandbox is ready (its resident started, the first calls usually come and go):
// 0.9-1.8 MiB less per idle keeper, for 13-20 ms of CPU once (docs/performance.md, issue 36's
// "idle memory on Node 22, 24 and 26").

/** After the sandbox is ready: the resident has started, and the keeper's start is garbage by then. */
export const STARTUP_COLLECTION_DELAY_MS = 3000;

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

/** Schedules the one collection (never keeping the process up); nothing where node exposes no `gc`. */
export function collectStartupGarbageOnce(delayMs = STARTUP_COLLECTION_DELAY_MS): void {
  const gc = (globalThis as { gc?: Collect }).gc;
  if (typeof gc !== 'function') return;
  // 'last-resort': the collection that also releases pooled pages and compacts (a plain one gives
  // nothing back on Node 24).
  setTimeout(() => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' }), delayMs).unref();
}
