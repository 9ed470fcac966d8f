// Ownership enforced where no tool can forget it: a session's tools reach providers only through
// its registry, and for a named principal that registry is this wrapper. create records the
// principal as owner; a user's template calls (create's template, snapshot, the listed names)
// carry their name, so they see and make only their own and the shared ones; list asks the provider for the principal's own sandboxes only (filtered
// before offset/limit); every other call first checks the sandbox's owner. A sandbox the
// principal may not see is reported exactly as one that does not exist (one fixed not_found,
// never permission_denied), so an id reveals nothing. Owners never change, so each is read from
// the provider once per process and then held in a bounded cache: a check costs a map lookup.
import { ProviderError, isProviderError } from '../providers/provider-error.js';
import { maySee, ownerRecordedBy, seesEverything, type Principal } from './principal.js';
import { definedFields } from '../util/defined-fields.js';
import { noSnapshots, noStopProcesses, noTerminal, unmeasuredUsage, type Provider } from '../providers/provider.js';
import type { ProviderRegistry } from '../providers/registry.js';

/** Owners held at most; the oldest are forgotten first (they are read again when needed). */
const OWNER_CACHE_MAX = 10_000;

/** The one answer for a sandbox a named user may not see or that does not exist: the same bytes either way. */
export function hiddenSandbox(): ProviderError {
  return new ProviderError('not_found', {
    code: 'sandbox_not_found',
    detail: 'No such sandbox: it does not exist, expired, or was destroyed. list_sandboxes shows yours.',
  });
}

/** Process-wide owners of sandboxes by qualified id (null: none recorded). */
export class OwnerCache {
  private readonly owners = new Map<string, string | null>();

  constructor(private readonly max = OWNER_CACHE_MAX) {}

  /** The cached owner, or undefined when not cached. */
  get(qualifiedId: string): string | null | undefined {
    return this.owners.get(qualifiedId);
  }

  /** Records an owner (at create, or once read from the provider). */
  set(qualifiedId: string, owner: string | null): void {
    this.owners.delete(qualifiedId);
    this.owners.set(qualifiedId, owner);
    if (this.owners.size > this.max) this.owners.delete(this.owners.keys().next().value!);
  }

  /** Forgets a destroyed sandbox. */
  delete(qualifiedId: string): void {
    this.owners.delete(qualifiedId);
  }
}

/** The registry a session of `principal` uses: the operator's is the registry itself, anyone else's checks ownership. */
export function scopeProviders(registry: ProviderRegistry, principal: Principal, owners: OwnerCache): ProviderRegistry {
  if (principal.kind === 'operator') return registry;
  const scoped = new Map<string, Provider>();
  return {
    get(id) {
      let provider = scoped.get(id);
      if (!provider) {
        provider = scopeProvider(registry.get(id), principal, owners);
        scoped.set(id, provider);
      }
      return provider;
    },
  };
}

/**
 * Typed Required<Provider> on purpose: every method of the interface, optional ones included, must
 * be written here, so a method added to Provider later fails to compile until it is forwarded.
 */
function scopeProvider(provider: Provider, principal: Principal, owners: OwnerCache): Required<Provider> {
  const key = (sandboxId: string) => `${provider.id}:${sandboxId}`;
  const isAdmin = seesEverything(principal);
  // Whose templates this principal's calls name and make: a user's own; none (shared, all) for an admin.
  const templateUser = isAdmin ? undefined : ownerRecordedBy(principal);

  async function ownerOf(sandboxId: string): Promise<string | null> {
    const cached = owners.get(key(sandboxId));
    if (cached !== undefined) return cached;
    try {
      const owner = await provider.getOwner(sandboxId);
      owners.set(key(sandboxId), owner);
      return owner;
    } catch (e) {
      // A missing sandbox must read exactly like a hidden one.
      throw isProviderError(e) && e.category === 'not_found' ? hiddenSandbox() : e;
    }
  }

  async function check(sandboxId: string): Promise<void> {
    if (isAdmin) return;
    if (!maySee(principal, await ownerOf(sandboxId))) throw hiddenSandbox();
  }

  return {
    id: provider.id,
    agentNode: provider.agentNode ?? 'node',
    // A user sees and uses the shared templates and their own; an admin every one, and makes shared ones.
    templateNames: () => provider.templateNames?.(templateUser) ?? [],
    async create({ templateUser: _asked, ...opts }) {
      const owner = ownerRecordedBy(principal) ?? null;
      const meta = await provider.create({ ...opts, ...definedFields({ owner: owner ?? undefined, templateUser }) });
      owners.set(key(meta.sandbox_id), owner);
      return meta;
    },
    list: (opts) => provider.list(isAdmin ? opts : { ...opts, ...definedFields({ owner: ownerRecordedBy(principal) }) }),
    async getInfo(sandboxId) {
      await check(sandboxId);
      return provider.getInfo(sandboxId);
    },
    async lifetimeEnd(sandboxId) {
      await check(sandboxId);
      return provider.lifetimeEnd ? provider.lifetimeEnd(sandboxId) : (await provider.getInfo(sandboxId)).end_at;
    },
    async setTimeout(sandboxId, timeoutS) {
      await check(sandboxId);
      return provider.setTimeout(sandboxId, timeoutS);
    },
    async kill(sandboxId) {
      await check(sandboxId);
      await provider.kill(sandboxId);
      owners.delete(key(sandboxId));
    },
    async getOwner(sandboxId) {
      await check(sandboxId);
      return provider.getOwner(sandboxId);
    },
    async getWorkspace(sandboxId) {
      await check(sandboxId);
      return (await provider.getWorkspace?.(sandboxId)) ?? null;
    },
    async imageWorkingDir(sandboxId) {
      await check(sandboxId);
      return (await provider.imageWorkingDir?.(sandboxId)) ?? null;
    },
    async getEnvironment(sandboxId) {
      await check(sandboxId);
      return provider.getEnvironment(sandboxId);
    },
    async exec(sandboxId, command, opts) {
      await check(sandboxId);
      return provider.exec(sandboxId, command, opts);
    },
    async readFile(sandboxId, path, opts) {
      await check(sandboxId);
      return provider.readFile(sandboxId, path, opts);
    },
    async writeFile(sandboxId, path, data, opts) {
      await check(sandboxId);
      return provider.writeFile(sandboxId, path, data, opts);
    },
    async listFiles(sandboxId, path, opts) {
      await check(sandboxId);
      return provider.listFiles(sandboxId, path, opts);
    },
    async exposePort(sandboxId, port) {
      await check(sandboxId);
      return provider.exposePort(sandboxId, port);
    },
    async describeNetwork(sandboxId) {
      await check(sandboxId);
      return provider.describeNetwork(sandboxId);
    },
    async limitNotes(sandboxId) {
      await check(sandboxId);
      return (await provider.limitNotes?.(sandboxId)) ?? [];
    },
    async egressNotes(sandboxId, window) {
      await check(sandboxId);
      return (await provider.egressNotes?.(sandboxId, window)) ?? [];
    },
    async usage(sandboxId) {
      await check(sandboxId);
      return (await provider.usage?.(sandboxId)) ?? unmeasuredUsage();
    },
    async stopProcesses(sandboxId) {
      await check(sandboxId);
      if (!provider.stopProcesses) throw noStopProcesses();
      return provider.stopProcesses(sandboxId);
    },
    async openTerminal(sandboxId, opts) {
      await check(sandboxId);
      if (!provider.openTerminal) throw noTerminal();
      return provider.openTerminal(sandboxId, opts);
    },
    async agentChannel(sandboxId, opts) {
      await check(sandboxId);
      return (await provider.agentChannel?.(sandboxId, opts)) ?? null;
    },
    async execPromotable(sandboxId, command, opts) {
      await check(sandboxId);
      return (await provider.execPromotable?.(sandboxId, command, opts)) ?? null;
    },
    async snapshot(sandboxId, name, opts) {
      await check(sandboxId);
      if (!provider.snapshot) throw noSnapshots();
      return provider.snapshot(sandboxId, name, { ...opts, ...definedFields({ owner: templateUser }) });
    },
    // The registry owns the provider's lifetime, not a session.
    close: async () => undefined,
  };
}
