// The built in-sandbox agent (dist/agent.cjs) and where it is installed in a sandbox: read by the
// agent client, which installs it for per-call agents, and by the providers that start a
// resident agent themselves (e2b).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { distDir } from '../util/dist-files.js';

/** The built agent: its bytes and the content-addressed name it is installed under. */
export interface AgentBundle {
  bytes: Buffer;
  fileName: string;
  version: string;
}

/** Where agents live in a sandbox, relative to the sandbox user's home. */
export const AGENT_INSTALL_DIR = '.sandbox-mcp/agent';

/** Loads dist/agent.cjs and its manifest (written by build/build.mjs). */
export function loadAgentBundle(dir = distDir()): AgentBundle {
  const manifest = JSON.parse(readFileSync(join(dir, 'agent-manifest.json'), 'utf8')) as { file_name: string; version: string };
  return { bytes: readFileSync(join(dir, 'agent.cjs')), fileName: manifest.file_name, version: manifest.version };
}
