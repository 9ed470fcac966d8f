import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One temporary folder per run, which must be empty at its end (test/support/run-tmpdir.ts),
    // and each test file's scratch in it removed when the file ends (test/support/scratch.ts).
    globalSetup: ['./test/support/run-tmpdir.ts'],
    setupFiles: ['./test/support/scratch-cleanup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll's ceiling, as waitFor's (test/support/wait.ts): a bound only a broken run
    // reaches, never vitest's 1 s, which a loaded machine's browser or sandbox can outlast.
    expect: { poll: { timeout: 30_000 } },
    // Real processes and sandboxes: two workers match this 2-core machine.
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', './test/support/summary-reporter.ts'],
    benchmark: { include: ['test/bench/**/*.bench.ts'] },
  },
});
