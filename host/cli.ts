// The sandbox-mcp CLI: serve MCP over stdio (default) or Streamable HTTP, `doctor`, `network`,
// the operator's commands (host/cli/), and protocol-level debugging commands that use the same
// agent client as the server. Loaded by main.ts.
import { randomBytes } from 'node:crypto';
import { PROTOCOL_VERSION, type AgentRequestInput } from '../shared/protocol.js';
import { AgentClient, loadAgentBundle } from './agent-client.js';
import { HELP, UsageError, parseCommandLine, type CommandLine } from './cli-args.js';
import { runOperatorCommand } from './cli/operator.js';
import { ConfigError, loadConfig, type ServerConfig } from './config.js';
import { hashToken, httpTokensFrom, readTokenFromStdin } from './tokens-file.js';
import { warnAtStartup } from './doctor/startup-warning.js';
import { localProviderOpts } from './local-options.js';
import { isProviderError } from './errors.js';
import { networkReport } from './network-cli.js';
import { createLogger } from './log.js';
import { SecretMasker } from './mask.js';
import { DEFAULT_MAX_WAITING_GETS } from './limit-options.js';
import { TaskRetention } from './retention.js';
import { createLocalProvider } from './providers/local/local-provider.js';
import { OwnerCache } from './providers/owner-scope.js';
import { createProviderRegistry, lazyProvider } from './providers/registry.js';
import { parseSandboxRef } from './sandbox-ref.js';
import type { ServerDeps } from './server-deps.js';
import { isLoopback, isWildcard, serveHttp } from './transports/http.js';
import { shutdownSignal } from './shutdown-signal.js';
import { sweepAtStart } from './startup-sweep.js';
import { watchForFaults } from './fault-handler.js';
import { serveStdio } from './transports/stdio.js';
import { definedFields } from './util/defined-fields.js';
import { WaitGate } from './wait-gate.js';

declare const __HOST_VERSION__: string;

function buildDeps(config: ServerConfig): ServerDeps & { close(): Promise<void> } {
  const log = createLogger({ isDebug: Boolean(process.env.SANDBOX_MCP_DEBUG) });
  const providers = createProviderRegistry({
    local: () =>
      createLocalProvider({
        ...localProviderOpts(config),
        // The egress proxies' refusals, by host name only (never a path, a port or anything the request carried).
        onNetworkDenied: (d) => log.warn('network denied', { sandbox_id: `local:${d.sandboxId}`, host: d.host }),
      }),
    e2b: () => lazyProvider('e2b', async () => (await import('./providers/e2b/e2b-provider.js')).createE2bProvider(config.e2b)),
  });
  return {
    config,
    providers,
    agent: new AgentClient(loadAgentBundle()),
    masker: new SecretMasker(config.secretValues),
    retention: new TaskRetention(),
    waits: new WaitGate(config.maxWaitingGets ?? DEFAULT_MAX_WAITING_GETS),
    owners: new OwnerCache(),
    log,
    close: () => providers.closeAll(),
  };
}

function fail(message: string, code = 2): never {
  process.stderr.write(`sandbox-mcp: ${message}\n`);
  process.exit(code);
}

/** What a person who started the server in a terminal sees: it waits for a client, silently otherwise. */
const TTY_HINT =
  'sandbox-mcp: serving MCP over stdio: waiting for an MCP client to speak JSON-RPC on stdin. ' +
  'Configure your client to start this command (see the README), or press Ctrl-C to stop.\n';

async function serveStdioCommand(config: ServerConfig): Promise<never> {
  warnAtStartup(config);
  if (process.stdin.isTTY) process.stderr.write(TTY_HINT);
  const deps = buildDeps(config);
  const faults = watchForFaults(deps.log);
  await serveStdio(deps, {
    stop: Promise.race([shutdownSignal(), faults.happened]),
    onServing: () => sweepAtStart(deps.providers, deps.log),
  });
  await deps.close();
  process.exit(faults.exitCode());
}

async function serveHttpCommand(config: ServerConfig, line: CommandLine): Promise<never> {
  if (isWildcard(line.host) && line.allowedHosts.length === 0) {
    fail('--host is a wildcard address: name the host names clients will use with --allowed-host (Host/Origin are checked against them)');
  }
  const { tokens, principals, generated } = httpTokensFrom(process.env, line.tokensFile, () => randomBytes(24).toString('base64url'));
  warnAtStartup(config);
  const deps = buildDeps(config);
  const faults = watchForFaults(deps.log);
  const handle = await serveHttp(deps, {
    host: line.host,
    port: line.port,
    tokens,
    idleTimeoutMs: line.idleTimeoutS * 1000,
    extraHosts: line.allowedHosts,
  });
  process.stderr.write(`sandbox-mcp: listening on ${handle.url}\n`);
  if (!isLoopback(line.host)) {
    process.stderr.write('sandbox-mcp: warning: listening beyond loopback; the bearer token travels in plain HTTP — put TLS in front\n');
  }
  if (generated) process.stderr.write(`sandbox-mcp: bearer token (shown once): ${generated}\n`);
  if (principals) process.stderr.write(`sandbox-mcp: ${principals} principals from the tokens file; each sees only its own sandboxes\n`);
  sweepAtStart(deps.providers, deps.log);
  const reason = await Promise.race([shutdownSignal(), faults.happened]);
  deps.log.info('http server stopping', { reason });
  await handle.close();
  await deps.close();
  process.exit(faults.exitCode());
}

async function agentCommand(config: ServerConfig, line: CommandLine): Promise<never> {
  const [sandboxId, op, json] = line.command === 'selftest' ? [line.args[0], 'selftest', undefined] : line.args;
  if (!sandboxId || !op) throw new UsageError('a sandbox id and an op are required');
  let extra: Record<string, unknown> = {};
  if (json !== undefined) {
    try {
      extra = JSON.parse(json) as Record<string, unknown>;
    } catch {
      fail('json must be a JSON object');
    }
    if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) fail('json must be a JSON object');
  }
  const deps = buildDeps(config);
  const ref = parseSandboxRef(sandboxId, config.defaultProvider);
  // Raw on purpose: the agent validates, so this command can probe its error handling too.
  const request = { protocol: PROTOCOL_VERSION, op, ...extra } as AgentRequestInput;
  const { line: raw, response } = await deps.agent.callRaw(deps.providers.get(ref.provider), ref.id, request, { timeoutS: 120 });
  process.stdout.write(raw + '\n');
  await deps.close();
  const passed = response.ok && (line.command === 'agent' || (response.result as { ok?: boolean }).ok === true);
  process.exit(passed ? 0 : 1);
}

async function networkCommand(config: ServerConfig, line: CommandLine): Promise<never> {
  const deps = buildDeps(config);
  process.stdout.write(JSON.stringify(await networkReport(deps, config, line.args[0]), null, 2) + '\n');
  await deps.close();
  process.exit(0);
}

async function main(argv: string[]): Promise<void> {
  const line = parseCommandLine(argv);
  if (line.help) return void process.stdout.write(HELP);
  if (line.version) return void process.stdout.write(`${__HOST_VERSION__}\n`);
  const config = loadConfig(process.env, {
    ...definedFields({ provider: line.provider, networkDefault: line.networkDefault, backgroundAfter: line.backgroundAfter }),
    keepSandboxes: line.keepSandboxes,
    networkAllow: line.networkAllow,
    limits: line.limits,
  });
  switch (line.command) {
    case 'stdio':
      return serveStdioCommand(config);
    case 'http':
      return serveHttpCommand(config, line);
    case 'token-hash':
      return void process.stdout.write(`${hashToken(await readTokenFromStdin())}\n`);
    case 'doctor':
      // Loaded only here: a server never needs the doctor's code.
      return process.exit(await (await import('./doctor/doctor.js')).runDoctor(config, { json: line.json }));
    case 'agent':
    case 'selftest':
      return agentCommand(config, line);
    case 'ls':
    case 'logs':
    case 'shell':
    case 'kill':
    case 'cancel':
      return process.exit(await runOperatorCommand(line.command, line, config, buildDeps));
    case 'network':
      return networkCommand(config, line);
  }
}

/** Runs the CLI (everything but the keeper); exits the process with a message on failure. */
export async function runCli(argv: string[]): Promise<void> {
  try {
    await main(argv);
  } catch (e) {
    if (e instanceof ConfigError || e instanceof UsageError) fail(e.message);
    if (isProviderError(e)) fail(`${e.category}: ${e.suggestion}`, 1);
    const code = (e as NodeJS.ErrnoException | undefined)?.code;
    if (code === 'EADDRINUSE') fail('the port is already in use (choose another with --port)', 1);
    if (code === 'EACCES') fail('not allowed to listen on that port (use one above 1023)', 1);
    if (code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND') fail('--host is not an address of this machine', 1);
    fail(`unexpected ${e instanceof Error ? e.name : 'error'}`, 1);
  }
}
