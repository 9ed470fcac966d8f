// Sandbox lifecycle on E2B's control plane: create, list, getInfo, setTimeout, kill. Everything but
// create uses the SDK's static methods, which never connect to a sandbox (no resume, no lifetime
// change). Failures are the SDK's own errors, unmapped, or a ProviderError for an option E2B does
// not have; the provider maps them.
import { Sandbox } from 'e2b';
import { ProviderError } from '../provider-error.js';
import { definedFields } from '../../util/defined-fields.js';
import { SANDBOX_LIFETIME_DEFAULT_S, type CreateOpts, type ListOpts, type SandboxMetadata, type SandboxWorkspace } from '../provider.js';
import { OWNER_METADATA_KEY, ownerFrom, toMetadata } from './metadata.js';
import { createNetworkOpts } from './network.js';
import type { SdkOpts } from './sdk-opts.js';
import { packWorkspace, unpackWorkspace, workspaceFrom, workspaceMetadata } from './workspace.js';

/** Lifecycle calls on E2B's control plane; only setTimeout changes a lifetime. */
export interface Lifecycle {
  /**
   * Creates a sandbox living `timeoutS` (default SANDBOX_LIFETIME_DEFAULT_S); returns its connection
   * (for envd) and its metadata. Nothing is left running on failure.
   */
  create(opts: CreateOpts): Promise<{ sandbox: Sandbox; metadata: SandboxMetadata }>;
  /** The window [offset, offset + limit) of the account's sandboxes, walking the SDK's pages. */
  list(opts: ListOpts): Promise<SandboxMetadata[]>;
  getInfo(sandboxId: string): Promise<SandboxMetadata>;
  /** The owner recorded in the sandbox's E2B metadata at create, or null. */
  getOwner(sandboxId: string): Promise<string | null>;
  /** The workspace recorded in the sandbox's E2B metadata at create, or null. */
  getWorkspace(sandboxId: string): Promise<SandboxWorkspace | null>;
  /** Sets the lifetime to `timeoutS` from now. */
  setTimeout(sandboxId: string, timeoutS: number): Promise<void>;
  /** Kills the sandbox; false when E2B does not know it. */
  kill(sandboxId: string): Promise<boolean>;
}

const DEFAULT_TEMPLATE = 'base';
const STATUSES = ['running', 'paused'] as const;
/** The SDK's largest list page. */
const MAX_PAGE = 100;

const UNSUPPORTED_RESOURCES =
  'E2B has no region, cpu or memory options: cpu and memory are chosen by building a template (e2b template build --cpu-count/--memory-mb); region is not an E2B option.';

function unsupportedResources(): ProviderError {
  return new ProviderError('unsupported', { code: 'UnsupportedOption', detail: UNSUPPORTED_RESOURCES });
}

/** Lifecycle calls over `sdkOpts` (called per call, so a missing key fails that call only). */
export function createLifecycle(sdkOpts: () => SdkOpts): Lifecycle {
  return {
    async create(o) {
      if (o.region !== undefined || o.cpu !== undefined || o.memoryMb !== undefined) throw unsupportedResources();
      const network = createNetworkOpts(o.network);
      const c = sdkOpts();
      // Read (and its size checked) before anything is created: a directory too large costs no sandbox.
      const packed = o.workspace !== undefined ? await packWorkspace(o.workspace) : undefined;
      const metadata = {
        ...(o.owner !== undefined ? { [OWNER_METADATA_KEY]: o.owner } : {}),
        ...(packed ? workspaceMetadata(packed) : {}),
      };
      const sandbox = await Sandbox.create(o.template ?? DEFAULT_TEMPLATE, {
        ...c,
        // Always sent: the SDK adds no default, and E2B's API default (15 s in its spec) is not the
        // lifetime the tools document and the session's renewal assumes.
        timeoutMs: (o.timeoutS ?? SANDBOX_LIFETIME_DEFAULT_S) * 1000,
        ...definedFields({ envs: o.envs, metadata: Object.keys(metadata).length > 0 ? metadata : undefined }),
        ...network,
      });
      try {
        if (packed) await unpackWorkspace(sandbox, packed);
        return { sandbox, metadata: toMetadata(await Sandbox.getInfo(sandbox.sandboxId, c)) };
      } catch (e) {
        // Nobody would learn this sandbox's id: do not leave it running.
        await Sandbox.kill(sandbox.sandboxId, c).catch(() => undefined);
        throw e;
      }
    },

    async list(o) {
      if (o.status !== undefined && !(STATUSES as readonly string[]).includes(o.status)) {
        throw new ProviderError('invalid_argument', { code: 'InvalidStatus', detail: 'E2B sandbox status is one of: running, paused.' });
      }
      if (o.region !== undefined) throw unsupportedResources();
      const pages = Sandbox.list({
        ...sdkOpts(),
        // E2B filters by metadata server-side, so offset and limit count the owner's sandboxes only.
        query: definedFields({
          state: o.status !== undefined ? [o.status as (typeof STATUSES)[number]] : undefined,
          metadata: o.owner !== undefined ? { [OWNER_METADATA_KEY]: o.owner } : undefined,
        }),
        limit: Math.min(MAX_PAGE, o.offset + o.limit),
      });
      // Only the requested window is kept: a large offset walks pages without holding them.
      const window: SandboxMetadata[] = [];
      let seen = 0;
      while (pages.hasNext && window.length < o.limit) {
        for (const item of await pages.nextItems()) {
          if (seen >= o.offset && window.length < o.limit) window.push(toMetadata(item));
          seen += 1;
        }
      }
      return window;
    },

    async getInfo(sandboxId) {
      return toMetadata(await Sandbox.getInfo(sandboxId, sdkOpts()));
    },

    async getOwner(sandboxId) {
      return ownerFrom((await Sandbox.getInfo(sandboxId, sdkOpts())).metadata);
    },

    async getWorkspace(sandboxId) {
      return workspaceFrom((await Sandbox.getInfo(sandboxId, sdkOpts())).metadata);
    },

    async setTimeout(sandboxId, timeoutS) {
      await Sandbox.setTimeout(sandboxId, timeoutS * 1000, sdkOpts());
    },

    async kill(sandboxId) {
      return Sandbox.kill(sandboxId, sdkOpts());
    },
  };
}
