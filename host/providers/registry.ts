// Providers by id, created on first use so a server that never touches E2B never needs its
// credentials (the e2b provider reports a missing key as an `authentication` error per call).
import { noSnapshots, noStopProcesses, noTerminal, unmeasuredUsage, type Provider } from './provider.js';
import type { ProviderId } from './sandbox-ref.js';

/** Looks up a provider by id; throws a ProviderError when it cannot be configured. */
export interface ProviderRegistry {
  get(id: ProviderId): Provider;
}

/** A registry over lazily-built providers; closeAll() releases those that were built. */
export function createProviderRegistry(factories: Record<ProviderId, () => Provider>): ProviderRegistry & { closeAll(): Promise<void> } {
  const built = new Map<ProviderId, Provider>();
  return {
    get(id) {
      let provider = built.get(id);
      if (!provider) {
        provider = factories[id]();
        built.set(id, provider);
      }
      return provider;
    },
    async closeAll() {
      await Promise.allSettled([...built.values()].map((p) => p.close()));
    },
  };
}

/**
 * A provider whose implementation is imported on first use: the E2B SDK alone adds about
 * 0.3 s to every server start, which a server that never touches E2B should not pay. Typed
 * Required<Provider> so that every method, optional ones included, must be forwarded here.
 */
export function lazyProvider(id: string, load: () => Promise<Provider>): Required<Provider> {
  let loading: Promise<Provider> | undefined;
  const get = () => (loading ??= load());
  return {
    id,
    // Synchronous, so not the loaded provider's: a lazily loaded provider runs the agent on the
    // sandbox's own node and lists no templates (the e2b provider's are E2B's account's).
    agentNode: 'node',
    templateNames: () => [],
    create: async (...a) => (await get()).create(...a),
    list: async (...a) => (await get()).list(...a),
    getInfo: async (...a) => (await get()).getInfo(...a),
    lifetimeEnd: async (sandboxId) => {
      const provider = await get();
      return provider.lifetimeEnd ? provider.lifetimeEnd(sandboxId) : (await provider.getInfo(sandboxId)).end_at;
    },
    setTimeout: async (...a) => (await get()).setTimeout(...a),
    kill: async (...a) => (await get()).kill(...a),
    getOwner: async (...a) => (await get()).getOwner(...a),
    getEnvironment: async (...a) => (await get()).getEnvironment(...a),
    exec: async (...a) => (await get()).exec(...a),
    readFile: async (...a) => (await get()).readFile(...a),
    writeFile: async (...a) => (await get()).writeFile(...a),
    listFiles: async (...a) => (await get()).listFiles(...a),
    exposePort: async (...a) => (await get()).exposePort(...a),
    describeNetwork: async (...a) => (await get()).describeNetwork(...a),
    getWorkspace: async (sandboxId) => (await (await get()).getWorkspace?.(sandboxId)) ?? null,
    imageWorkingDir: async (sandboxId) => (await (await get()).imageWorkingDir?.(sandboxId)) ?? null,
    limitNotes: async (sandboxId) => (await (await get()).limitNotes?.(sandboxId)) ?? [],
    egressNotes: async (sandboxId, window) => (await (await get()).egressNotes?.(sandboxId, window)) ?? [],
    usage: async (sandboxId) => (await (await get()).usage?.(sandboxId)) ?? unmeasuredUsage(),
    stopProcesses: async (sandboxId) => {
      const provider = await get();
      if (!provider.stopProcesses) throw noStopProcesses();
      return provider.stopProcesses(sandboxId);
    },
    openTerminal: async (sandboxId, opts) => {
      const provider = await get();
      if (!provider.openTerminal) throw noTerminal();
      return provider.openTerminal(sandboxId, opts);
    },
    agentChannel: async (sandboxId, opts) => (await (await get()).agentChannel?.(sandboxId, opts)) ?? null,
    execPromotable: async (sandboxId, command, opts) => (await (await get()).execPromotable?.(sandboxId, command, opts)) ?? null,
    snapshot: async (sandboxId, name, opts) => {
      const provider = await get();
      if (!provider.snapshot) throw noSnapshots();
      return provider.snapshot(sandboxId, name, opts);
    },
    close: async () => {
      if (loading) await (await loading).close();
    },
  };
}
