// The host-side half of an isolated sandbox's network, started by its keeper once pid 1 runs and
// before the sandbox is reported ready (so no process of the sandbox's can take the proxy's port
// first): the egress proxy on the sandbox's 127.0.0.1:SANDBOX_PROXY_PORT when the sandbox has an
// allow-list, and the control socket through which servers expose its ports. The keeper holds the
// result until the sandbox ends, so both live exactly as long as the sandbox, with or without a
// server. A sandbox sharing the host's network needs neither.
import { parseAllowList } from '../../network-policy.js';
import type { HeldResource } from '../keeper/held-resources.js';
import { SANDBOX_PROXY_PORT } from '../launch/environment.js';
import { specNetwork, type SandboxSpec } from '../sandbox/spec.js';
import { serveControl, type ControlReply, type ControlRequest } from './control-channel.js';
import { DenialLog } from './denial-log.js';
import { startEgressProxy, type EgressProxy } from './egress-proxy.js';
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
      const denials = new DenialLog(dir);
      const listener = await sockets.listen(SANDBOX_PROXY_PORT).catch((e: unknown) => {
        throw new EgressProxyStartError(e instanceof NetnsError ? e.code : 'internal');
      });
      proxy = await startEgressProxy(listener, {
        entries: parseAllowList(allowOut),
        onDenied: (host) => denials.record(host),
      });
    }
    control = await serveControl(dir, (req) => answer(forwards, req));
  } catch (e) {
    await closeAll();
    throw e;
  }
  return {
    release: closeAll,
    releaseNow: () => void closeAll().catch(() => undefined),
  };
}

async function answer(forwards: PortForwards, req: ControlRequest): Promise<ControlReply> {
  try {
    return { ok: true, host_port: await forwards.expose(req.port) };
  } catch (e) {
    return { ok: false, code: e instanceof ExposeError ? e.code : 'internal' };
  }
}
