// Where the tests find the repository, the built files and the process fixtures.
import { join, resolve } from 'node:path';

/** The repository root. */
export const REPO = resolve(import.meta.dirname, '../..');
/** The built server entry (`npm run build` writes it; SANDBOX_MCP_E2E_HOST points at another, e.g. an installed one). */
export const HOST_JS = process.env.SANDBOX_MCP_E2E_HOST ?? join(REPO, 'dist/host.js');
/** The local provider's built keeper. */
export const KEEPER_SCRIPT = join(REPO, 'dist/keeper.cjs');
/** The built in-sandbox agent. */
export const AGENT_BUNDLE = join(REPO, 'dist/agent.cjs');
/** Tiny process fixtures (forever, exit-N, ignore-SIGTERM, spew-bytes, print-secret, …). */
export const FIXTURES = join(REPO, 'test/fixtures');

/** A shell command running one of test/fixtures/*.sh with bash, its arguments single-quoted. */
export function fixture(name: string, ...args: string[]): string {
  return ['bash', join(FIXTURES, name), ...args].map((a) => `'${a}'`).join(' ');
}
