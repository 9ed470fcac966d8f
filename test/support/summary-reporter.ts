// Ends a test run with one plain line, "tests: N passed, N failed[, N skipped]", that any CI log
// reader understands (vitest's own summary is styled for terminals).
import type { Reporter, TestModule } from 'vitest/node';

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') counts.passed++;
        else if (state === 'failed') counts.failed++;
        else counts.skipped++;
      }
      // A file that failed to load, or whose hook failed (its tests then read as skipped), must not
      // read as a pass: it counts once unless one of its tests already failed.
      const testFailed = [...module.children.allTests()].some((t) => t.result().state === 'failed');
      if (module.state() === 'failed' && !testFailed) counts.failed++;
    }
    counts.failed += unhandledErrors.length;
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : '';
    process.stdout.write(`\ntests: ${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
  }
}
