// Placeholder entry; replaced by the agent implementation.
import { PROTOCOL_VERSION } from '../shared/protocol.js';
declare const __AGENT_VERSION__: string;
process.stdout.write(JSON.stringify({ agent_version: __AGENT_VERSION__, protocol: PROTOCOL_VERSION }) + '\n');
