// envd connections (the SDK's Sandbox objects, which hold the envd token) by sandbox id. The SDK's
// only way to a token is Sandbox.connect, and E2B's connect lengthens a running sandbox's lifetime
// to whatever it is asked (300 s when asked nothing) — it never shortens one. So a connection is
// made asking for no more than the lifetime left, which changes nothing. Sandboxes that expire are
// never announced, so the cache is bounded: the least recently used connection goes first, and a
// forgotten sandbox is simply connected again, still without extension, on its next use.
import { Sandbox } from 'e2b';
import type { SdkOpts } from './sdk-opts.js';

/** Tuning of the connection cache. */
export interface ConnectionsOpts {
  /** Subtracted from the remaining lifetime a connect asks for, so request latency never extends it. */
  connectMarginMs?: number;
  /** Most envd connections (Sandbox objects) kept for reuse; the least recently used is dropped. */
  maxConnections?: number;
}

/** A bounded cache of envd connections; none of its calls lengthens a running sandbox's lifetime. */
export interface Connections {
  /** The cached connection, else a new one by connectWithoutExtension; a failed connect is not kept. */
  get(sandboxId: string): Promise<Sandbox>;
  /** Keeps a connection obtained elsewhere (Sandbox.create's), as the most recently used. */
  remember(sandbox: Sandbox): void;
  /** Drops a sandbox's connection (the sandbox is gone, or the connection may be stale). */
  forget(sandboxId: string): void;
  /** Drops every connection. */
  clear(): void;
}

const DEFAULT_CONNECT_MARGIN_MS = 2000;
const DEFAULT_MAX_CONNECTIONS = 256;

/**
 * Connects to a sandbox without lengthening its lifetime: a running one is asked for its remaining
 * lifetime (from the static getInfo) less `marginMs`; a paused one is resumed by the SDK's normal
 * connect, with the platform's default lifetime (E2B's lifecycle behaviour, not an extension).
 * Throws the SDK's errors unmapped.
 */
export async function connectWithoutExtension(sandboxId: string, sdkOpts: SdkOpts, marginMs: number): Promise<Sandbox> {
  const info = await Sandbox.getInfo(sandboxId, sdkOpts);
  if (info.state === 'paused') return Sandbox.connect(sandboxId, sdkOpts);
  const remainingS = Math.max(0, Math.floor((info.endAt.getTime() - Date.now() - marginMs) / 1000));
  return Sandbox.connect(sandboxId, { ...sdkOpts, timeoutMs: remainingS * 1000 });
}

/** A connection cache over `sdkOpts` (called per connect, so a missing key fails that call only). */
export function createConnections(sdkOpts: () => SdkOpts, opts: ConnectionsOpts = {}): Connections {
  const marginMs = opts.connectMarginMs ?? DEFAULT_CONNECT_MARGIN_MS;
  const max = opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  // A Map iterates in insertion order: re-inserting on use keeps the least recently used first.
  const byId = new Map<string, Promise<Sandbox>>();

  function touch(sandboxId: string, p: Promise<Sandbox>): void {
    byId.delete(sandboxId);
    byId.set(sandboxId, p);
    if (byId.size > max) byId.delete(byId.keys().next().value!);
  }

  return {
    get(sandboxId) {
      let p = byId.get(sandboxId);
      if (!p) {
        const connecting = (async () => connectWithoutExtension(sandboxId, sdkOpts(), marginMs))();
        // The caller sees the failure; the cache only lets go of it (unless replaced meanwhile).
        connecting.catch(() => {
          if (byId.get(sandboxId) === connecting) byId.delete(sandboxId);
        });
        p = connecting;
      }
      touch(sandboxId, p);
      return p;
    },
    remember(sandbox) {
      touch(sandbox.sandboxId, Promise.resolve(sandbox));
    },
    forget(sandboxId) {
      byId.delete(sandboxId);
    },
    clear() {
      byId.clear();
    },
  };
}
