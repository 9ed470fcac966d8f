// Node's flags for the two node processes every local sandbox keeps for its whole life, the keeper
// and the resident agent (issue 21: together at most 20 MiB PSS per idle sandbox; docs/performance.md).
// Both hold little data: a small old space and 1 MiB semi-spaces bound their heaps.

/** The heap bounds both processes get on every Node.js line. */
export const SMALL_HEAP_FLAGS = ['--max-old-space-size=32', '--max-semi-space-size=1'] as const;

/** The major version of a V8 version string (`process.versions.v8`); 0 when it has none. */
function v8Major(v8Version: string): number {
  return Number(/^(\d+)\./.exec(v8Version)?.[1] ?? 0);
}

/**
 * From V8 13 (Node 24 and 26) an idle process keeps its young generation's two semi-spaces
 * committed (2 MiB with 1 MiB semi-spaces, some 0.4 MiB of it in use), where V8 12 (Node 22) gives
 * them back once idle. `--minor-ms` (V8's young-generation mark-sweep, on pages it can release;
 * known since V8 12.4) takes 0.7–0.9 MiB anonymous off each idle keeper and resident on Node 24
 * and 26 (test/bench/idle-memory.bench.ts). Not on older lines: Node 20's V8 has no such flag (an
 * unknown flag stops node), and on Node 22 it made no difference.
 */
export function youngGenerationFlags(v8Version: string): string[] {
  return v8Major(v8Version) >= 13 ? ['--minor-ms'] : [];
}

/**
 * On V8 11 (Node 20) the memory reducer gives a new process's start-up garbage back 3 s after its
 * old generation first grew instead of 8 s (`--gc-memory-reducer-start-delay-ms`, the delay of the
 * reducer's first round; a round that finds the process busy still waits 8 s more). Sandboxes
 * created and called at once (test/bench/concurrency.bench.ts's idle part: 8 sandboxes, a
 * run_command and a start_task each) held 20.1–21.8 MiB PSS 5 s after the last call, keeper 8.2
 * and resident 9.6 MiB anonymous; with it 16.1–16.4, 6.6 and 7.4 — what they held without it only
 * after the reducer's round, some 8 s later. The same collections, earlier: no more CPU. Not on later
 * lines: Node 22 read the same with it, and on Node 24 a shorter delay changed nothing.
 */
export function memoryReducerFlags(v8Version: string): string[] {
  return v8Major(v8Version) === 11 ? ['--gc-memory-reducer-start-delay-ms=3000'] : [];
}

/**
 * From V8 13 (Node 24 and 26) Node turns on Maglev, V8's mid-tier optimizing compiler (Node 22's
 * V8 12 leaves it off). The keeper and the resident run little hot code: without it they touch
 * fewer pages of node's binary (0.15 MiB less file PSS each). 8 sandboxes, a run_command and a
 * start_task each, read 5 s after the last call: 27.98–27.99 MiB PSS per sandbox against
 * 28.38–28.44 on Node 24, 28.03–28.10 against 28.45–28.46 on Node 26; the CPU of a promotable
 * run_command within noise (Node 24 9.00 / 8.45 ms against 9.00 / 8.95; Node 26 8.91 against
 * 8.73 over four runs, the keeper's and resident's share 2.04 against 2.00). Not before V8 13,
 * where Maglev is already off (docs/performance.md, issue 36's "idle memory on Node 22, 24 and 26").
 */
export function compilerFlags(v8Version: string): string[] {
  return v8Major(v8Version) >= 13 ? ['--no-maglev'] : [];
}

/** Every flag of this node's line that both the keeper and the resident get beside their own. */
export function lineFlags(v8Version: string): string[] {
  return [...youngGenerationFlags(v8Version), ...memoryReducerFlags(v8Version), ...compilerFlags(v8Version)];
}

/**
 * The keeper only: `--expose-gc` from V8 12 (Node 22 and later), for its one collection of its
 * start-up garbage (startup-garbage.ts), which V8's memory reducer never makes on Node 24 and 26.
 * Not on Node 20, whose reducer gives it back 3 s after the start (memoryReducerFlags).
 */
export function keeperCollectionFlags(v8Version: string): string[] {
  return v8Major(v8Version) >= 12 ? ['--expose-gc'] : [];
}
