// The host directories every new sandbox binds, as one provider instance keeps them: the agent's
// runtime (agent-runtime.ts) and the base view's /etc (base-view.ts), made in the cache directory on
// first use and looked at again at most once a minute, so a create pays for a check (a few
// thousand stats) only now and then, and a host change shows in sandboxes created a minute later.
import { agentRuntimeDirFor } from './agent-runtime.js';
import { prepareBaseEtc } from './base-view.js';
import { hostCacheDir, removeStaleTemporaries } from './cache-dir.js';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

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

  constructor(stateDir: string, isRoot: boolean, nodePath: string, recheckMs = HOST_VIEW_RECHECK_MS) {
    this.cache = new Refreshed(() => {
      const dir = hostCacheDir(stateDir, isRoot);
      for (const sub of ['runtime', 'base-etc']) removeStaleTemporaries(join(dir, sub));
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
    return this.runtime.get();
  }

  /** The base view's /etc. */
  baseEtcDir(): string {
    return this.etc.get();
  }

  /** An empty directory where a launch helper shows a template sandbox's root to bwrap (TemplateRoot.mountPoint). */
  rootMountPoint(): string {
    const dir = join(this.cache.get(), 'mnt');
    mkdirSync(dir, { mode: 0o755, recursive: true });
    return dir;
  }
}
