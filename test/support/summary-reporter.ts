// Ends a test run with one plain line, "tests: N passed, N failed[, N skipped]", that any CI log
// reader understands (vitest's own summary is styled for terminals), followed by one "failed:" line
// per failure with the first lines of its error: a CI log may keep only its tail, and .ci/run
// repeats these lines at its very end, so a failure is named even where vitest's report is cut off.
import type { Reporter, TestModule } from 'vitest/node';

/** How much of a failure's error is repeated: enough to tell which assertion, not a stack. */
const ERROR_LINES = 4;
const ERROR_CHARS = 400;

function firstLines(error: { name?: string; message?: string } | undefined): string {
  const text = `${error?.name ?? 'Error'}: ${error?.message ?? '(no message)'}`;
  const lines = text.split('\n').slice(0, ERROR_LINES).join('\n');
  const cut = lines.length > ERROR_CHARS ? `${lines.slice(0, ERROR_CHARS)}…` : lines;
  return cut.replace(/^/gm, '    ');
}

export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    const counts = { passed: 0, failed: 0, skipped: 0 };
    const failures: string[] = [];
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const result = test.result();
        if (result.state === 'passed') counts.passed++;
        else if (result.state === 'failed') {
          counts.failed++;
          failures.push(`failed: ${module.relativeModuleId} > ${test.fullName}\n${firstLines(result.errors[0])}`);
        } else counts.skipped++;
      }
      // A file that failed to load, or whose hook failed (its tests then read as skipped), must not
      // read as a pass: it counts once unless one of its tests already failed.
      const testFailed = [...module.children.allTests()].some((t) => t.result().state === 'failed');
      if (module.state() === 'failed' && !testFailed) {
        counts.failed++;
        failures.push(`failed: ${module.relativeModuleId} (the file: load or hook)\n${firstLines(module.errors()[0])}`);
      }
    }
    counts.failed += unhandledErrors.length;
    for (const error of unhandledErrors) failures.push(`failed: unhandled error\n${firstLines(error as Error)}`);
    const skipped = counts.skipped ? `, ${counts.skipped} skipped` : '';
    process.stdout.write(`\ntests: ${counts.passed} passed, ${counts.failed} failed${skipped}\n`);
    for (const failure of failures) process.stdout.write(`${failure}\n`);
  }
}
