// A serving process from start to exit: build the dependencies, watch for faults and signals,
// serve MCP on one transport until one of them ends it, then release everything and exit with
// the fault handler's status. Both transports end through the same cleanup.
import { randomBytes } from 'node:crypto';
import { httpTokensFrom } from '../access/tokens-file.js';
import type { ServerConfig } from '../config/config.js';
import { createDashboard, listenDashboard } from '../dashboard/dashboard.js';
import { OneTimeCode } from '../dashboard/sessions.js';
import { isLoopback, serveHttp } from '../mcp/transports/http.js';
import { serveStdio } from '../mcp/transports/stdio.js';
import { buildDeps } from './build-deps.js';
import { watchForFaults } from './fault-handler.js';
import { shutdownSignal } from './shutdown-signal.js';
import { sweepAtStart } from './startup-sweep.js';

/** What a person who started the server in a terminal sees: it waits for a client, silently otherwise. */
const TTY_HINT =
  'sandbox-mcp: serving MCP over stdio: waiting for an MCP client to speak JSON-RPC on stdin. ' +
  'Configure your client to start this command (see the README), or press Ctrl-C to stop.\n';

/** Serves one stdio session until EOF, a signal or a fault; then exits. */
export async function serveStdioProcess(config: ServerConfig): Promise<never> {
  if (process.stdin.isTTY) process.stderr.write(TTY_HINT);
  const deps = buildDeps(config, { logsEgressFailures: true });
  const faults = watchForFaults(deps.log);
  await serveStdio(deps, {
    stop: Promise.race([shutdownSignal(), faults.happened]),
    onServing: () => sweepAtStart(deps.providers, deps.log),
  });
  await deps.close();
  process.exit(faults.exitCode());
}

/** The HTTP listener as the command line chose it. */
export interface HttpServeOpts {
  host: string;
  port: number;
  tokensFile?: string;
  idleTimeoutS: number;
  allowedHosts: string[];
  /** Serve no dashboard at / (--no-dashboard). */
  noDashboard?: boolean;
}

/** Serves Streamable HTTP until a signal or a fault; then exits. */
export async function serveHttpProcess(config: ServerConfig, opts: HttpServeOpts): Promise<never> {
  const { tokens, principals, generated } = httpTokensFrom(process.env, opts.tokensFile, () => randomBytes(24).toString('base64url'));
  const deps = buildDeps(config, { logsEgressFailures: true });
  const faults = watchForFaults(deps.log);
  const dashboard = opts.noDashboard ? undefined : createDashboard(deps, { tokens });
  const handle = await serveHttp(deps, {
    host: opts.host,
    port: opts.port,
    tokens,
    idleTimeoutMs: opts.idleTimeoutS * 1000,
    extraHosts: opts.allowedHosts,
    ...(dashboard ? { otherRoutes: dashboard.handle } : {}),
  });
  process.stderr.write(`sandbox-mcp: listening on ${handle.url}\n`);
  if (dashboard) process.stderr.write(`sandbox-mcp: dashboard at ${new URL('/', handle.url).href} (sign in with a token)\n`);
  if (!isLoopback(opts.host)) {
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

/**
 * Serves the dashboard alone (sandbox-mcp dashboard) on loopback until a signal or a fault, as
 * the operator: it sees every sandbox, as `ls` does. Sign-in is by a one-time link printed to
 * stderr (for a person, outside the log); a line on stdin prints a new one.
 */
export async function serveDashboardProcess(config: ServerConfig, opts: { port: number }): Promise<never> {
  // Like the operator's commands, it only looks: earlier egress failures are not logged again.
  const deps = buildDeps(config, { logsEgressFailures: false });
  const faults = watchForFaults(deps.log);
  const codes = new OneTimeCode();
  const server = await listenDashboard(createDashboard(deps, { oneTimeCode: codes }), opts.port, (e) =>
    deps.log.warn('dashboard request failed', { unexpected: e instanceof Error ? e.name : typeof e }),
  );
  // The code is in the fragment, which a browser never sends to the server.
  const printLink = (): void =>
    void process.stderr.write(
      `sandbox-mcp dashboard: open ${server.url}#code=${codes.issue()} (it works once, for 10 minutes; press Enter for a new link)\n`,
    );
  printLink();
  process.stdin.on('data', printLink);
  process.stdin.on('error', () => undefined);
  const reason = await Promise.race([shutdownSignal(), faults.happened]);
  deps.log.info('dashboard stopping', { reason });
  await server.close();
  await deps.close();
  process.exit(faults.exitCode());
}
