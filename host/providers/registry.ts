// Providers by id, created on first use so a server that never touches E2B never needs its
// credentials (the e2b provider reports a missing key as an `authentication` error per call).
import type { ProviderId } from '../config.js';
import type { ProviderRegistry } from '../tools/tool.js';
import type { Provider } from './provider.js';

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
