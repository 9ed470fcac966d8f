// The sandbox-mcp CLI: serve MCP over stdio (default) or Streamable HTTP, `doctor`, `network`,
// the operator's commands, and protocol-level debugging commands that use the same
// agent client as the server. Loaded by main.ts.
import { PROTOCOL_VERSION, type AgentRequestInput } from '../../shared/protocol.js';
import { hashToken, readTokenFromStdin } from '../access/tokens-file.js';
import { ConfigError, loadConfig, type ServerConfig } from '../config/config.js';
import { HOST_VERSION } from '../config/version.js';
import { isWildcard } from '../mcp/transports/http.js';
import { isProviderError } from '../providers/provider-error.js';
import { buildDeps, type ClosableDeps } from '../serve/build-deps.js';
import { serveDashboardProcess, serveHttpProcess, serveStdioProcess } from '../serve/serve.js';
import { definedFields } from '../util/defined-fields.js';
import { HELP, UsageError, parseCommandLine, type CommandLine } from './args.js';
import { warnAtStartup } from './doctor/startup-warning.js';
import { networkReport } from './network.js';
import { runOperatorCommand, sandboxIdArg } from './operator.js';

/** A CLI command's dependencies: it prints what the person asked for and its own errors, no server log lines. */
function commandDeps(config: ServerConfig): ClosableDeps {
  return buildDeps(config, { logsEgressFailures: false });
}

function fail(message: string, code = 2): never {
  process.stderr.write(`sandbox-mcp: ${message}\n`);
  process.exit(code);
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
  const ref = sandboxIdArg(sandboxId, config);
  const deps = commandDeps(config);
  // Raw on purpose: the agent validates, so this command can probe its error handling too.
  const request = { protocol: PROTOCOL_VERSION, op, ...extra } as AgentRequestInput;
  const { line: raw, response } = await deps.agent.callRaw(deps.providers.get(ref.provider), ref.id, request, { timeoutS: 120 });
  process.stdout.write(raw + '\n');
  await deps.close();
  const passed = response.ok && (line.command === 'agent' || (response.result as { ok?: boolean }).ok === true);
  process.exit(passed ? 0 : 1);
}

async function networkCommand(config: ServerConfig, line: CommandLine): Promise<never> {
  // A malformed id is a bad command line (exit 2), as for the operator's commands.
  if (line.args[0] !== undefined) sandboxIdArg(line.args[0], config);
  const deps = commandDeps(config);
  process.stdout.write(JSON.stringify(await networkReport(deps, config, line.args[0]), null, 2) + '\n');
  await deps.close();
  process.exit(0);
}

async function main(argv: string[]): Promise<void> {
  const line = parseCommandLine(argv);
  if (line.help) return void process.stdout.write(HELP);
  if (line.version) return void process.stdout.write(`${HOST_VERSION}\n`);
  const config = loadConfig(process.env, {
    ...definedFields({
      provider: line.provider,
      networkDefault: line.networkDefault,
      backgroundAfter: line.backgroundAfter,
      templateDir: line.templateDir,
      maxSnapshotStorage: line.maxSnapshotStorage,
    }),
    keepSandboxes: line.keepSandboxes,
    networkAllow: line.networkAllow,
    workspaceAllow: line.workspaceAllow,
    sandboxRoBinds: line.sandboxRoBinds,
    limits: line.limits,
  });
  switch (line.command) {
    case 'stdio':
      warnAtStartup(config);
      return serveStdioProcess(config);
    case 'http':
      if (isWildcard(line.host) && line.allowedHosts.length === 0) {
        fail(
          '--host is a wildcard address: name the host names clients will use with --allowed-host (Host/Origin are checked against them)',
        );
      }
      warnAtStartup(config);
      return serveHttpProcess(config, line);
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
    case 'diff':
    case 'apply':
    case 'snapshot':
      return process.exit(await runOperatorCommand(line.command, line, config, commandDeps));
    case 'network':
      return networkCommand(config, line);
    case 'template':
      // Loaded only here, as the doctor's code is.
      return process.exit(await (await import('./template.js')).runTemplateCommand(line, config));
    case 'dashboard':
      return serveDashboardProcess(config, { port: line.port });
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
