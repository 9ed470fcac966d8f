// What ending a session does to its sandboxes: those no task retains are destroyed (now, or once
// an in-flight start fails); with --keep-sandboxes, none are.
import { isProviderError } from '../providers/provider-error.js';
import { parseSandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from './server-deps.js';
import type { Session } from './session.js';

/**
 * Destroys the session's sandboxes that no task retains (now, or once an in-flight start fails);
 * with --keep-sandboxes, none: they live until their own deadline.
 */
export async function closeSession(deps: ServerDeps, session: Session): Promise<void> {
  const destroy = async (qualified: string): Promise<void> => {
    const ref = parseSandboxRef(qualified, deps.config.defaultProvider);
    try {
      await deps.providers.get(ref.provider).kill(ref.id);
    } catch (e) {
      if (!isProviderError(e) || e.category !== 'not_found')
        deps.log.warn('session cleanup failed', { category: isProviderError(e) ? e.category : 'internal' });
    }
  };
  const owned = session.close();
  if (deps.config.keepSandboxes) {
    if (owned.length) deps.log.info('session closed', { destroyed: 0, kept: owned.length });
    return;
  }
  const now = owned.filter((id) => deps.retention.mayDestroy(id, () => destroy(id)));
  await Promise.all(now.map(destroy));
  if (owned.length) deps.log.info('session closed', { destroyed: now.length, kept: owned.length - now.length });
}
