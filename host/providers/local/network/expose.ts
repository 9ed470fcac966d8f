// expose_port on the server's side: asks the sandbox's keeper (over its control socket) for the
// host loopback port that forwards to the sandbox's port. The keeper owns the mapping, so every
// server — a restarted one included — gets the same URL, and the URL ends with the sandbox. A
// sandbox sharing the host's network serves on the host's loopback already: its port is the URL.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ProviderError } from '../../provider-error.js';
import { assertExposablePort, type ExposedPort, type ReservedPorts } from '../../provider.js';
import { SANDBOX_PROXY_PORT } from '../launch/environment.js';
import { sandboxGone, type SandboxRegistry } from '../sandbox/registry.js';
import { specNetwork } from '../sandbox/spec.js';
import { CONTROL_SOCKET } from '../sandbox/state-dir.js';
import { controlSocketPath, requestControl, type ControlFailure } from './control-channel.js';
import { MAX_EXPOSED_PORTS } from './port-forwards.js';

/** The ports of a local sandbox that are ours: its egress proxy's (refused whatever the sandbox's network, so the rule is one). */
const RESERVED_PORTS: ReservedPorts = { [SANDBOX_PROXY_PORT]: "the sandbox's egress proxy (HTTP_PROXY)" };

function hostUrl(port: number): string {
  return `http://127.0.0.1:${port}/`;
}

/** The ProviderError for a keeper's refusal to expose a port. */
export function exposeRefusal(code: ControlFailure): ProviderError {
  switch (code) {
    case 'too_many_ports':
      return new ProviderError('insufficient_resources', {
        code,
        detail:
          `A sandbox may expose at most ${MAX_EXPOSED_PORTS} ports, and they stay exposed until it ends: serve on a port already exposed ` +
          '(expose_port gives the same URL for it again), or use another sandbox.',
      });
    case 'listen_failed':
      return new ProviderError('unavailable', { code, detail: "No port on the host's loopback could be opened for the sandbox's port." });
    case 'bad_request':
    case 'internal':
      return new ProviderError('internal', { code });
  }
}

/** The expose_port operation of the local provider. */
export class SandboxPorts {
  constructor(private readonly registry: SandboxRegistry) {}

  /** The host URL of the sandbox's `port`; throws (not yet mapped) for a bad port or a gone sandbox. */
  async expose(sandboxId: string, port: number): Promise<ExposedPort> {
    assertExposablePort(port, RESERVED_PORTS);
    const sb = await this.registry.require(sandboxId);
    if (specNetwork(sb.spec) === 'host') return { url: hostUrl(port) };
    if (!existsSync(join(sb.dir, CONTROL_SOCKET))) {
      if (!(await this.registry.inspect(sandboxId))) throw sandboxGone();
      throw new ProviderError('unsupported', {
        code: 'no_control_socket',
        detail: 'This sandbox was created by an older version of the server, which cannot expose its ports; create a new sandbox.',
      });
    }
    const reply = await requestControl(controlSocketPath(sb.dir, sb.keeper.keeper.pid), { op: 'expose', port });
    if (reply === null) {
      if (!(await this.registry.inspect(sandboxId))) throw sandboxGone();
      throw new ProviderError('unavailable', { code: 'keeper_unreachable', detail: "The sandbox's keeper did not answer; retry." });
    }
    if (!reply.ok) throw exposeRefusal(reply.code);
    if (!('host_port' in reply)) throw new ProviderError('internal', { code: 'bad_reply' });
    return { url: hostUrl(reply.host_port) };
  }
}
