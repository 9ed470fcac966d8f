// The sandbox-mcp CLI: serve MCP over stdio (default) or Streamable HTTP, plus protocol-level
// debugging commands that use the same agent client as the server. Loaded by main.ts.
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { PROTOCOL_VERSION, type AgentRequestInput } from '../shared/protocol.js';
import { AgentClient, loadAgentBundle } from './agent-client.js';
import { ConfigError, loadConfig, type ServerConfig } from './config.js';
import { isProviderError } from './errors.js';
import { LIMIT_OPTIONS, limitOptionsHelp, DEFAULT_MAX_WAITING_GETS } from './limit-options.js';
import { createLogger } from './log.js';
import { SecretMasker } from './mask.js';
import { TaskRetention } from './retention.js';
import { definedFields } from './util/defined-fields.js';
import { WaitGate } from './wait-gate.js';
import { createLocalProvider } from './providers/local/local-provider.js';
import { createProviderRegistry, lazyProvider } from './providers/registry.js';
import { parseSandboxRef } from './sandbox-ref.js';
import type { ServerDeps } from './server-deps.js';
import { isLoopback, isWildcard, serveHttp } from './transports/http.js';
import { serveStdio } from './transports/stdio.js';

declare const __HOST_VERSION__: string;

const HELP = `sandbox-mcp ${__HOST_VERSION__} — an MCP server for sandboxes with reconnectable background tasks

Usage:
  sandbox-mcp [--provider local|e2b]          serve MCP over stdio (one session; on EOF its
                                              unretained sandboxes are destroyed)
  sandbox-mcp http [--host 127.0.0.1] [--port 8765] [--idle-timeout 1800] [--provider local|e2b]
                   [--allowed-host NAME[:PORT]]...
                                              serve Streamable HTTP at /mcp (bearer token required;
                                              Host/Origin must name the bound address or an
                                              --allowed-host; a wildcard --host needs them)
  sandbox-mcp agent <sandbox_id> <op> [json]  send one raw agent protocol request (op: hello,
                                              start, get, cancel, selftest; json: extra fields)
                                              and print the raw response line
  sandbox-mcp selftest <sandbox_id>           run the agent's selftest inside a sandbox
  sandbox-mcp --help | --version

Configuration (flags win over environment):
  --provider, SANDBOX_MCP_PROVIDER   default provider for create_sandbox and unqualified ids
                                     (local: bubblewrap sandboxes on this machine; e2b: E2B cloud)
  SANDBOX_MCP_STATE_DIR              local provider state (default $XDG_STATE_HOME/sandbox-mcp,
                                     else ~/.local/state/sandbox-mcp)
  SANDBOX_MCP_LOCAL_NETWORK          isolated (default: a local sandbox has only its own
                                     loopback) or host (shares this machine's network,
                                     including its loopback services)
  SANDBOX_MCP_TOKEN                  HTTP bearer token, 16+ characters (default: generated,
                                     printed once to stderr)
  SANDBOX_MCP_DEBUG                  log debug lines (stderr)
  E2B_API_KEY, E2B_DOMAIN            E2B credentials and domain (E2B_API_URL/E2B_SANDBOX_URL
                                     override endpoints)
Resource limits (flags win over environment; see the README's "Resource limits"):
${limitOptionsHelp()}
Secrets: values of this server's environment variables whose names contain KEY, TOKEN, SECRET
or PASSWORD are masked in command and task output. Logs go to stderr only.
`;

function buildDeps(config: ServerConfig): ServerDeps & { close(): Promise<void> } {
  const log = createLogger({ isDebug: Boolean(process.env.SANDBOX_MCP_DEBUG) });
  const providers = createProviderRegistry({
    local: () =>
      createLocalProvider({ network: config.localNetwork, ...definedFields({ stateDir: config.stateDir, limits: config.localLimits }) }),
    e2b: () => lazyProvider('e2b', async () => (await import('./providers/e2b/e2b-provider.js')).createE2bProvider(config.e2b)),
  });
  return {
    config,
    providers,
    agent: new AgentClient(loadAgentBundle()),
    masker: new SecretMasker(config.secretValues),
    retention: new TaskRetention(),
    waits: new WaitGate(config.maxWaitingGets ?? DEFAULT_MAX_WAITING_GETS),
    log,
    close: () => providers.closeAll(),
  };
}

/** A shorter bearer token is too easy to guess. */
const MIN_TOKEN_CHARS = 16;

function fail(message: string, code = 2): never {
  process.stderr.write(`sandbox-mcp: ${message}\n`);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean' },
      provider: { type: 'string' },
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8765' },
      'idle-timeout': { type: 'string', default: '1800' },
      'allowed-host': { type: 'string', multiple: true, default: [] },
      ...Object.fromEntries(LIMIT_OPTIONS.map((o) => [o.flag, { type: 'string' as const }])),
    },
  });
  if (values.help) return void process.stdout.write(HELP);
  if (values.version) return void process.stdout.write(`${__HOST_VERSION__}\n`);
  const config = loadConfig(process.env, {
    provider: values.provider,
    limits: Object.fromEntries(LIMIT_OPTIONS.map((o) => [o.flag, (values as Record<string, unknown>)[o.flag] as string | undefined])),
  });
  const deps = buildDeps(config);
  const [sub, ...rest] = positionals;

  if (sub === undefined) {
    await serveStdio(deps);
    await deps.close();
    process.exit(0);
  }
  if (sub === 'http') {
    const port = Number(values.port);
    const idleS = Number(values['idle-timeout']);
    if (!Number.isInteger(port) || port < 0 || port > 65535) fail('--port must be an integer 0-65535');
    if (!Number.isInteger(idleS) || idleS < 1) fail('--idle-timeout must be a positive integer (seconds)');
    const extraHosts = values['allowed-host']
      .flatMap((h) => h.split(','))
      .map((h) => h.trim())
      .filter(Boolean);
    if (isWildcard(values.host) && extraHosts.length === 0) {
      fail('--host is a wildcard address: name the host names clients will use with --allowed-host (Host/Origin are checked against them)');
    }
    const envToken = process.env.SANDBOX_MCP_TOKEN;
    if (envToken !== undefined && envToken.length < MIN_TOKEN_CHARS)
      fail(`SANDBOX_MCP_TOKEN must be at least ${MIN_TOKEN_CHARS} characters`);
    const token = envToken || randomBytes(24).toString('base64url');
    const handle = await serveHttp(deps, { host: values.host, port, token, idleTimeoutMs: idleS * 1000, extraHosts });
    process.stderr.write(`sandbox-mcp: listening on ${handle.url}\n`);
    if (!isLoopback(values.host)) {
      process.stderr.write('sandbox-mcp: warning: listening beyond loopback; the bearer token travels in plain HTTP — put TLS in front\n');
    }
    if (!process.env.SANDBOX_MCP_TOKEN) process.stderr.write(`sandbox-mcp: bearer token (shown once): ${token}\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await handle.close();
    await deps.close();
    process.exit(0);
  }
  if (sub === 'agent' || sub === 'selftest') {
    const [sandboxId, op, json] = sub === 'selftest' ? [rest[0], 'selftest', undefined] : rest;
    if (!sandboxId || !op) fail(`usage: sandbox-mcp ${sub === 'agent' ? 'agent <sandbox_id> <op> [json]' : 'selftest <sandbox_id>'}`);
    let extra: Record<string, unknown> = {};
    if (json !== undefined) {
      try {
        extra = JSON.parse(json) as Record<string, unknown>;
      } catch {
        fail('json must be a JSON object');
      }
      if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) fail('json must be a JSON object');
    }
    const ref = parseSandboxRef(sandboxId, config.defaultProvider);
    // Raw on purpose: the agent validates, so this command can probe its error handling too.
    const request = { protocol: PROTOCOL_VERSION, op, ...extra } as AgentRequestInput;
    const { line, response } = await deps.agent.callRaw(deps.providers.get(ref.provider), ref.id, request, { timeoutS: 120 });
    process.stdout.write(line + '\n');
    await deps.close();
    const passed = response.ok && (sub === 'agent' || (response.result as { ok?: boolean }).ok === true);
    process.exit(passed ? 0 : 1);
  }
  fail(`unknown command (see sandbox-mcp --help)`);
}

/** Runs the CLI (everything but the keeper); exits the process with a message on failure. */
export async function runCli(argv: string[]): Promise<void> {
  try {
    await main(argv);
  } catch (e) {
    if (e instanceof ConfigError) fail(e.message);
    if (isProviderError(e)) fail(`${e.category}: ${e.suggestion}`, 1);
    const code = (e as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'EADDRINUSE') fail('the port is already in use (choose another with --port)', 1);
    if (code === 'EACCES') fail('not allowed to listen on that port (use one above 1023)', 1);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') fail('--host is not an address of this machine', 1);
    if (e instanceof TypeError && 'code' in e && String(e.code).startsWith('ERR_PARSE_ARGS'))
      fail('invalid arguments (see sandbox-mcp --help)');
    fail(`unexpected ${e instanceof Error ? e.name : 'error'}`, 1);
  }
}
