// One MCP server per session, shared by both transports: it wires the SDK's Server to this
// session — the instructions (instructions.ts), tools/list (tool-list.ts), tools/call
// (tool-call.ts) with progress (tools/progress.ts), params screening (transports/message-check.ts)
// — and ends the session once (session-close.ts), waiting boundedly for calls still running.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { CallToolRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { OPERATOR, type Principal } from '../access/principal.js';
import { scopeProviders } from '../access/owner-scope.js';
import { HOST_VERSION } from '../config/version.js';
import { definedFields } from '../util/defined-fields.js';
import { serveToolsAndViews } from './apps.js';
import { instructionsFor } from './instructions.js';
import type { ServerDeps } from './server-deps.js';
import { closeSession } from './session-close.js';
import { Session } from './session.js';
import { callTool } from './tool-call.js';
import { listTools, withListNotes } from './tool-list.js';
import { progressNotifier } from './tools/progress.js';
import { screenRequests } from './transports/message-check.js';

/** How long session close waits for in-flight tool calls to settle. */
const IN_FLIGHT_GRACE_MS = 30_000;

/** What createServer returns: the SDK server, its session, and the two ways to wire and end it. */
export interface SessionServer {
  server: Server;
  session: Session;
  /** Connects the transport, with requests of the wrong shape refused before the SDK sees them. */
  connect(transport: Transport): Promise<void>;
  /** The session's cleanup (once, however often called). */
  close(): Promise<void>;
}

/** Who a session serves and over what. */
export interface SessionServerOpts {
  /** The principal whose sandboxes the session may see (default: the single-user operator). */
  principal?: Principal;
  /** A stdio session that destroys its sandboxes notes so in each create_sandbox result. */
  transport?: 'stdio' | 'http';
}

/**
 * A low-level MCP Server wired to one session of `opts.principal`. Its tools reach providers only
 * through a registry scoped to that principal, so none can skip the ownership check.
 */
export function createServer(processDeps: ServerDeps, opts: SessionServerOpts = {}): SessionServer {
  const principal = opts.principal ?? OPERATOR;
  const deps: ServerDeps = { ...processDeps, providers: scopeProviders(processDeps.providers, principal, processDeps.owners) };
  const keep = deps.config.keepSandboxes === true;
  const session = new Session({ hasCleanupNote: opts.transport === 'stdio' && !keep });
  const server = new Server(
    { name: 'sandbox-mcp', version: HOST_VERSION },
    // `resources` serves the MCP App task view (apps.ts); it must be declared before connect.
    { capabilities: { tools: {}, resources: {} }, instructions: instructionsFor(deps.config) },
  );
  // Only the error's class name: a transport's or handler's message may carry values.
  server.onerror = (e) => deps.log.warn('mcp protocol error', { unexpected: e instanceof Error ? e.name : typeof e });
  const tools = listTools(deps.config);
  // A tool's listNote is read at every listing: a template made since shows without a restart.
  serveToolsAndViews(server, () => withListNotes(tools, deps));
  const inFlight = new Set<Promise<unknown>>();
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const ctx = { deps, session, ...definedFields({ signal: extra.signal, progress: progressNotifier(extra) }) };
    const call = callTool(ctx, request.params.name, request.params.arguments);
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call)).catch(() => undefined);
    return call;
  });
  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    await closeSession(deps, session);
    // Calls still running (a create_sandbox, say) see the closed session and clean up after
    // themselves; wait for them, boundedly, so the process does not exit under them.
    // The bound's timer is cleared once they settle: left to run, each closed session's would be
    // held for the whole grace (a heap snapshot after 144 HTTP sessions: 121 such timers live).
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, IN_FLIGHT_GRACE_MS)).unref());
    await Promise.race([Promise.allSettled([...inFlight]), grace]);
    clearTimeout(timer);
  };
  return {
    server,
    session,
    async connect(transport) {
      await server.connect(transport);
      screenRequests(transport, deps.log);
    },
    close: () => (closing ??= close()),
  };
}
