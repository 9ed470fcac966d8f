// A server start sweeps dead sandboxes (a keeper killed -9 leaves its state directory and cgroups
// behind). The local provider sweeps when it is built, so the server builds it as soon as its
// transport is up rather than at the first tool call that needs it: the first answer is not held
// back, and a server that only lists tools or only uses e2b still sweeps. A provider that cannot
// be built here (bad settings) is left to report that at its first call; the sweep never needs
// bubblewrap.
import { isProviderError } from '../providers/provider-error.js';
import type { Logger } from '../util/log.js';
import { LocalProvider } from '../providers/local/local-provider.js';
import type { Provider } from '../providers/provider.js';
import type { ProviderRegistry } from '../providers/registry.js';

/** Starts the local state directory's sweep of dead sandboxes and logs one line when it is done (or could not run); never throws. */
export function sweepAtStart(providers: ProviderRegistry, log: Logger): void {
  let local: Provider;
  try {
    local = providers.get('local');
  } catch (e) {
    log.warn('start-up sweep skipped', { category: isProviderError(e) ? e.category : 'internal' });
    return;
  }
  if (!(local instanceof LocalProvider)) return;
  local.sweptAtStart().then(
    (removed) => log.info('start-up sweep done', { removed }),
    () => log.warn('start-up sweep failed'),
  );
}
