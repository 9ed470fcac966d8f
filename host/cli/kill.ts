// `sandbox-mcp kill`: destroys a sandbox (kill_sandbox's complete cleanup), by explicit id only.
import * as z from 'zod';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';

/** What `kill --json` prints: the sandbox destroyed (a failure is an error on stderr instead). */
export const KillResultSchema = z.strictObject({ sandbox_id: z.string(), killed: z.literal(true) });
export type KillResult = z.infer<typeof KillResultSchema>;

/** Destroys the sandbox. Throws the provider's error (not_found when it does not exist). */
export async function killSandbox(deps: Pick<ServerDeps, 'providers'>, sandbox: SandboxRef): Promise<KillResult> {
  await deps.providers.get(sandbox.provider).kill(sandbox.id);
  return { sandbox_id: sandbox.qualified, killed: true };
}

/** The line `kill` prints for people. */
export function killLine(result: KillResult): string {
  return `killed ${result.sandbox_id}`;
}
