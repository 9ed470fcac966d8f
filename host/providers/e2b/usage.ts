// What an E2B sandbox uses, from E2B's own metrics (Sandbox.getMetrics: a control-plane REST call
// that never connects to the sandbox, so it neither resumes nor lengthens it). E2B samples memory
// and disk with their totals; it does not count processes.
import { Sandbox, type SandboxMetrics } from 'e2b';
import type { SandboxUsage } from '../provider.js';
import type { SdkOpts } from './sdk-opts.js';

/** Only the last minutes' samples are asked for: without `start`, E2B returns every one since the sandbox started. */
const RECENT_MS = 2 * 60_000;

/** The newest sample as SandboxUsage; every amount null when E2B has none yet. */
export function usageFromMetrics(samples: readonly SandboxMetrics[]): SandboxUsage {
  const newest = [...samples].sort((a, b) => a.timestamp.getTime() - b.timestamp.getTime()).at(-1);
  if (!newest) return { memoryBytes: null, processes: null, diskBytes: null };
  return {
    memoryBytes: { used: newest.memUsed, limit: newest.memTotal },
    processes: null,
    diskBytes: { used: newest.diskUsed, limit: newest.diskTotal },
  };
}

/** The sandbox's usage now (unmapped SDK errors: the provider maps them). */
export async function readUsage(sandboxId: string, sdkOpts: SdkOpts): Promise<SandboxUsage> {
  return usageFromMetrics(await Sandbox.getMetrics(sandboxId, { ...sdkOpts, start: new Date(Date.now() - RECENT_MS) }));
}
