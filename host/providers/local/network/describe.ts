// A local sandbox's effective network for people (the debug CLI), from what its state directory
// records: the mode and allow-list of its spec, and the ports its keeper last wrote to ports.json.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NetworkDescription } from '../../provider.js';
import { SANDBOX_PROXY_PORT } from '../launch/environment.js';
import type { SandboxRegistry } from '../sandbox/registry.js';
import { specNetwork } from '../sandbox/spec.js';
import { PORTS_FILE } from '../sandbox/state-dir.js';
import type { ExposedPortRecord } from './port-forwards.js';

function exposedPorts(dir: string): NetworkDescription['exposed_ports'] {
  try {
    const records = JSON.parse(readFileSync(join(dir, PORTS_FILE), 'utf8')) as ExposedPortRecord[];
    return records.map((r) => ({ port: r.port, url: `http://127.0.0.1:${r.host_port}/` }));
  } catch {
    return [];
  }
}

/** The network of the live sandbox `sandboxId`; throws not_found otherwise. */
export async function describeSandboxNetwork(registry: SandboxRegistry, sandboxId: string): Promise<NetworkDescription> {
  const sb = await registry.require(sandboxId);
  if (specNetwork(sb.spec) === 'host') return { egress: 'host', allow_out: [], proxy: null, exposed_ports: [] };
  const allowOut = sb.spec.allowOut ?? [];
  return {
    egress: allowOut.length > 0 ? 'allow_out' : 'none',
    allow_out: allowOut,
    proxy: allowOut.length > 0 ? `http://127.0.0.1:${SANDBOX_PROXY_PORT}` : null,
    exposed_ports: exposedPorts(sb.dir),
  };
}
