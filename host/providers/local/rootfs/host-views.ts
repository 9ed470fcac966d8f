// The host directories every new sandbox binds, as one provider instance keeps them: the agent's
// runtime (agent-runtime.ts) and the base view's /etc (base-view.ts), made in the cache directory on
// first use and looked at again at most once a minute, so a create pays for a check (a few
// thousand stats) only now and then, and a host change shows in sandboxes created a minute later.
// Right after a server first hands out its own entry of each kind, it removes the entries of that
// kind nobody can still need (cache-prune.ts): once per server, a listing of the kind's directory
// and, only when some entry is a day old, one read of the live processes' mounts; the removed
// entries' files go in the background.
import { agentRuntimeDirFor } from './agent-runtime.js';
import { prepareBaseEtc } from './base-view.js';
import { hostCacheDir, removeStaleTemporaries } from './cache-dir.js';
import { pruneCacheEntries } from './cache-prune.js';
import { createLogger, isDebugOn } from '../../../util/log.js';
import { mkdirSync } from 'node:fs';
import { basename, join } from 'node:path';

/** The kinds of entries the cache keeps: its subdirectories. */
type CacheKind = 'runtime' | 'base-etc';

/** How long a prepared directory is used before the host is looked at again. */
export const HOST_VIEW_RECHECK_MS = 60_000;

/** A value computed on first use and again once it is older than `maxAgeMs`. */
class Refreshed<T> {
  private value: T | undefined;
  private atMs = 0;

  constructor(
    private readonly compute: () => T,
    private readonly maxAgeMs: number,
  ) {}

  get(): T {
    if (this.value === undefined || Date.now() - this.atMs > this.maxAgeMs) {
      this.value = this.compute();
      this.atMs = Date.now();
    }
    return this.value;
  }
}

/** The prepared host directories of one provider instance. */
export class HostViews {
  private readonly cache: Refreshed<string>;
  private readonly runtime: Refreshed<string>;
  private readonly etc: Refreshed<string>;
  /** The kinds pruned already by this instance. */
  private readonly pruned = new Set<CacheKind>();

  constructor(stateDir: string, isRoot: boolean, nodePath: string, recheckMs = HOST_VIEW_RECHECK_MS) {
    this.cache = new Refreshed(() => {
      const dir = hostCacheDir(stateDir, isRoot);
      for (const kind of ['runtime', 'base-etc'] satisfies CacheKind[]) removeStaleTemporaries(join(dir, kind));
      return dir;
    }, Infinity);
    this.runtime = new Refreshed(() => agentRuntimeDirFor(this.cache.get(), nodePath), recheckMs);
    this.etc = new Refreshed(() => prepareBaseEtc(this.cache.get()), recheckMs);
  }

  /** The cache directory (the server's own: no sandbox may see it). */
  cacheDir(): string {
    return this.cache.get();
  }

  /** The agent's runtime directory for node at `nodePath` (the server's). */
  runtimeDir(): string {
    return this.pruneOnce('runtime', this.runtime.get());
  }

  /** The base view's /etc. */
  baseEtcDir(): string {
    return this.pruneOnce('base-etc', this.etc.get());
  }

  /** Prunes the entries of `kind` but `own` the first time it is called for `kind` (never failing; the files go in the background); returns `own`. */
  private pruneOnce(kind: CacheKind, own: string): string {
    if (this.pruned.has(kind)) return own;
    this.pruned.add(kind);
    const log = createLogger({ isDebug: isDebugOn(process.env) });
    const startMs = Date.now();
    try {
      const result = pruneCacheEntries(join(this.cache.get(), kind), { keep: [basename(own)] });
      if (result.removed.length > 0 || result.isUnsure)
        void result.done
          .then(() =>
            log.debug('cache pruned', {
              kind,
              removed: result.removed.length,
              kept_bound: result.bound.length,
              unsure: result.isUnsure,
              ms: Date.now() - startMs,
            }),
          )
          .catch(() => undefined);
    } catch (e) {
      log.debug('cache prune failed', { kind, code: (e as NodeJS.ErrnoException).code ?? 'unknown' });
    }
    return own;
  }

  /** An empty directory where a launch helper shows a template sandbox's root to bwrap (TemplateRoot.mountPoint). */
  rootMountPoint(): string {
    const dir = join(this.cache.get(), 'mnt');
    mkdirSync(dir, { mode: 0o755, recursive: true });
    return dir;
  }
}
