// The host-side half of an isolated sandbox's network, started by its keeper once pid 1 runs and
// before the sandbox is reported ready (so no process of the sandbox's can take the proxy's port
// first): the egress proxy on the sandbox's 127.0.0.1:SANDBOX_PROXY_PORT when the sandbox has an
// allow-list, and the control socket through which servers expose its ports and ask for the
// proxy's recent failures. The keeper holds the
// result until the sandbox ends, so both live exactly as long as the sandbox, with or without a
// server. A sandbox sharing the host's network needs neither.
import { parseAllowList } from '../../network-policy.js';
import type { HeldResource } from '../keeper/held-resources.js';
import { SANDBOX_PROXY_PORT } from '../launch/environment.js';
import { specNetwork, type SandboxSpec } from '../sandbox/spec.js';
import { serveControl, type ControlReply, type ControlRequest } from './control-channel.js';
import { FailureMemory } from './egress-failures.js';
import { startEgressProxy, type EgressProxy } from './egress-proxy.js';
import { FailureLog } from './failure-log.js';
import { NetnsError, NetnsSockets } from './netns-sockets.js';
import { ExposeError, PortForwards } from './port-forwards.js';

/** What the keeper knows when it opens the network: its sandbox, and where pid 1 and it itself run. */
export interface SandboxNetworkOpts {
  dir: string;
  spec: SandboxSpec;
  pid1: number;
  nodePath: string;
  keeperScript: string;
}

/** The egress proxy could not be started (the helper could not enter the namespace, or listen there). */
export class EgressProxyStartError extends Error {
  constructor(readonly code: string) {
    super(code);
  }
}

/**
 * Opens the sandbox's network services; null when it has none. Throws EgressProxyStartError when
 * the proxy cannot start (the sandbox must not start without it), anything else for a fault of
 * the keeper's own (its state directory gone, say).
 */
export async function openSandboxNetwork(opts: SandboxNetworkOpts): Promise<HeldResource | null> {
  const { dir, spec } = opts;
  if (specNetwork(spec) === 'host') return null;
  const sockets = new NetnsSockets({
    pid1: opts.pid1,
    nsenter: spec.tools.nsenter,
    enterUserNs: !spec.identity.dropPrivileges,
    nodePath: opts.nodePath,
    keeperScript: opts.keeperScript,
  });
  const forwards = new PortForwards(sockets, dir);
  const failures = new FailureMemory();
  let proxy: EgressProxy | null = null;
  let control: { close(): void } | null = null;
  const closeAll = (): Promise<void> => {
    control?.close();
    forwards.close();
    proxy?.close();
    return sockets.close();
  };
  try {
    const allowOut = spec.allowOut ?? [];
    if (allowOut.length > 0) {
      const log = new FailureLog(dir);
      const listener = await sockets.listen(SANDBOX_PROXY_PORT).catch((e: unknown) => {
        throw new EgressProxyStartError(e instanceof NetnsError ? e.code : 'internal');
      });
      proxy = await startEgressProxy(listener, {
        entries: parseAllowList(allowOut),
        onFailure: (failure) => {
          const atMs = Date.now();
          failures.record(failure, atMs);
          log.record(failure, atMs);
        },
      });
    }
    control = await serveControl(dir, (req) => answer(forwards, failures, req));
  } catch (e) {
    await closeAll();
    throw e;
  }
  return {
    release: closeAll,
    releaseNow: () => void closeAll().catch(() => undefined),
  };
}

async function answer(forwards: PortForwards, failures: FailureMemory, req: ControlRequest): Promise<ControlReply> {
  if (req.op === 'failures') return { ok: true, failures: failures.between(req.since_ms, req.until_ms) };
  try {
    return { ok: true, host_port: await forwards.expose(req.port) };
  } catch (e) {
    return { ok: false, code: e instanceof ExposeError ? e.code : 'internal' };
  }
}
