// The message of the UsageError a command line gets, for the tests of the command-line parser.
import { expect } from 'vitest';
import { parseCommandLine, UsageError } from '../../host/cli/args.js';

/** The UsageError message `argv` gets; fails the test when it is accepted or throws anything else. */
export function usageError(argv: string[]): string {
  try {
    parseCommandLine(argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error(`${argv.join(' ')} was accepted`);
}
