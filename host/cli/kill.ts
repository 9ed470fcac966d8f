// `sandbox-mcp kill`: destroys a sandbox (kill_sandbox's complete cleanup), by explicit id only.
import type { SandboxRef } from '../sandbox-ref.js';
import type { ServerDeps } from '../server-deps.js';

/** Destroys the sandbox; returns the line to print. Throws the provider's error (not_found when it does not exist). */
export async function killSandbox(deps: Pick<ServerDeps, 'providers'>, sandbox: SandboxRef): Promise<string> {
  await deps.providers.get(sandbox.provider).kill(sandbox.id);
  return `killed ${sandbox.qualified}`;
}
