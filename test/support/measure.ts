// Small measuring helpers shared by the benchmarks (test/bench): medians of interleaved samples.

/** The median of `xs` (the upper middle of an even count); `xs` is not reordered. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** How long `fn` took, in milliseconds. */
export async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}
