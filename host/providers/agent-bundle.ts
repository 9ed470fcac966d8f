// The built in-sandbox agent (dist/agent.cjs) and where it is installed in a sandbox: read by the
// agent client, which installs it for per-call agents, and by the providers that start a
// resident agent themselves (e2b).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The built agent: its bytes and the content-addressed name it is installed under. */
export interface AgentBundle {
  bytes: Buffer;
  fileName: string;
  version: string;
}

/** Where agents live in a sandbox, relative to the sandbox user's home. */
export const AGENT_INSTALL_DIR = '.sandbox-mcp/agent';

/** Loads dist/agent.cjs and its manifest (written by build/build.mjs). */
export function loadAgentBundle(distDir = defaultDistDir()): AgentBundle {
  const manifest = JSON.parse(readFileSync(join(distDir, 'agent-manifest.json'), 'utf8')) as { file_name: string; version: string };
  return { bytes: readFileSync(join(distDir, 'agent.cjs')), fileName: manifest.file_name, version: manifest.version };
}

function defaultDistDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // Bundled, this module is a chunk under dist/chunks/; from sources it is host/providers/agent-bundle.ts.
  const candidates = [join(here, '..'), here, join(here, '..', '..', 'dist')];
  return candidates.find((dir) => existsSync(join(dir, 'agent-manifest.json'))) ?? join(here, '..', 'dist');
}
