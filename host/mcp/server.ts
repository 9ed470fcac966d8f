// One MCP server per session, shared by both transports: the seeds' fifteen tools and the later
// ones, strict input validation (naming the field, never echoing the value), structured results,
// and the session's cleanup. Tool failures are `isError` results; only protocol misuse is a JSON-RPC error.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  isJSONRPCRequest,
  McpError,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
} from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import * as z from 'zod';
import { describeIssue } from '../../shared/protocol.js';
import { ProviderError, isProviderError } from '../providers/provider-error.js';
import { SANDBOX_LIFETIME_DEFAULT_S } from '../providers/provider.js';
import { OPERATOR, type Principal } from '../access/principal.js';
import { scopeProviders } from '../access/owner-scope.js';
import { parseSandboxRef } from '../providers/sandbox-ref.js';
import { Session } from './session.js';
import { execTools } from './tools/exec.js';
import { fileTools } from './tools/files.js';
import { sandboxTools } from './tools/sandboxes.js';
import { networkSummary, networkTools } from './tools/network.js';
import { taskTools } from './tools/tasks.js';
import type { ServerConfig } from '../config/config.js';
import type { ServerDeps } from './server-deps.js';
import type { ProgressNotifier } from './tools/tool.js';
import type { ToolDef } from './tools/tool.js';
import { screenParams } from './transports/message-check.js';
import { serveToolsAndViews } from './apps.js';
import { definedFields } from '../util/defined-fields.js';
import { HOST_VERSION } from '../config/version.js';

/** Every tool, in the order tools/list shows them. */
export const ALL_TOOLS: readonly ToolDef[] = [
  ...sandboxTools,
  ...execTools,
  ...fileTools,
  ...taskTools,
  ...networkTools,
] as unknown as ToolDef[];

/** What becomes of the sandboxes a session creates, as the instructions tell it (see --keep-sandboxes). */
const SESSION_END = {
  destroyed: 'sandboxes you create are destroyed when this session ends, unless you started a task in them',
  kept: 'sandboxes you create outlive this session until their timeout: destroy them with kill_sandbox when done',
};

/**
 * What the initialize result tells a model: the workflow (what becomes of its sandboxes follows
 * `keepSandboxes`, the server option), then the network its sandboxes have.
 */
export function instructionsFor(config: Pick<ServerConfig, 'keepSandboxes' | 'localNetwork' | 'network'>): string {
  const keepSandboxes = config.keepSandboxes === true;
  return [
    'sandbox-mcp gives you Linux sandboxes. Workflow:',
    `1. create_sandbox (it becomes your default; ${keepSandboxes ? SESSION_END.kept : SESSION_END.destroyed}).`,
    `   A sandbox lives \`timeout\` seconds (default ${SANDBOX_LIFETIME_DEFAULT_S}) and tasks never extend it: for long tasks create it with a longer timeout or call set_sandbox_timeout.`,
    '2. run_command / run_code for synchronous work; files with read_file, write_file, list_files, upload_file, download_file.',
    '   Clients often cut a call at about 60 s: when a command might take longer (installs, builds, tests), pass background_after (e.g. 50).',
    '   If it is still running then, the result has backgrounded: true and a task_id: continue with get_task as for start_task.',
    '3. For long work, start_task and SAVE both sandbox_id and task_id: they keep working across disconnects and server restarts.',
    '4. Read output with get_task, passing the returned stdout_next_offset / stderr_next_offset each time; use wait (up to 30 s) instead of polling in a loop.',
    '   A task waiting at a prompt (installer question, REPL) shows it in its output: answer with send_task_input (eof: true closes its stdin).',
    '5. cancel_task stops a task; when finished, destroy retained sandboxes with kill_sandbox.',
    'Long calls report notifications/progress every ~10 s when you send a progressToken.',
    networkSummary(config),
  ].join('\n');
}

/** How long session close waits for in-flight tool calls to settle. */
const IN_FLIGHT_GRACE_MS = 30_000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

const toolsByName = new Map(ALL_TOOLS.map((t) => [t.name, t]));

function errorResult(e: ProviderError): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: e.toJSON() }) }] };
}

/** Runs one tool call by name: validate, run, check, shape the result. Never throws for tool-level failures. */
export async function callTool(
  deps: ServerDeps,
  session: Session,
  name: string,
  args: unknown,
  signal?: AbortSignal,
  progress?: ProgressNotifier,
): Promise<CallToolResult> {
  const tool = toolsByName.get(name);
  if (!tool) throw new McpError(ErrorCode.InvalidParams, 'unknown tool');
  return runTool(tool, deps, session, args, signal, progress);
}

/**
 * Runs one call of `tool`: its input is validated before it runs and its result against its
 * output schema before anyone sees it, so a client gets a result of the declared shape or an
 * error result, never a malformed answer. Never throws for tool-level failures.
 */
export async function runTool(
  tool: ToolDef,
  deps: ServerDeps,
  session: Session,
  args: unknown,
  signal?: AbortSignal,
  progress?: ProgressNotifier,
): Promise<CallToolResult> {
  const name = tool.name;
  const started = Date.now();
  const parsed = tool.input.safeParse(args ?? {});
  if (!parsed.success) {
    deps.log.info('tool call', { tool: name, outcome: 'invalid_argument' });
    return errorResult(new ProviderError('invalid_argument', { detail: describeIssue(parsed.error, args ?? {}) }));
  }
  try {
    const { result, content = [] } = await tool.run(parsed.data, { deps, session, ...definedFields({ signal, progress }) });
    const checked = tool.output.safeParse(result);
    if (!checked.success) {
      // A bug of ours, not the caller's: name the tool and the field, never a value.
      deps.log.warn('tool result does not match its output schema', { tool: name, issue: describeIssue(checked.error, result) });
      deps.log.info('tool call', { tool: name, outcome: 'internal', ms: Date.now() - started });
      return errorResult(new ProviderError('internal', { code: 'output_schema_mismatch' }));
    }
    deps.log.info('tool call', { tool: name, outcome: 'ok', ms: Date.now() - started });
    return { content: [{ type: 'text', text: JSON.stringify(result) }, ...content], structuredContent: result as Record<string, unknown> };
  } catch (e) {
    const error = isProviderError(e) ? e : new ProviderError('internal');
    // Only the error's class name: an unexpected exception's message may carry values or paths.
    deps.log.info('tool call', {
      tool: name,
      outcome: error.category,
      ms: Date.now() - started,
      ...(isProviderError(e) ? {} : { unexpected: e instanceof Error ? e.name : typeof e }),
    });
    return errorResult(error);
  }
}

/** The tools/list entries under `config`: JSON Schemas generated from the same zod schemas that validate calls. */
export function listTools(config?: ServerConfig): {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  annotations: Record<string, unknown>;
}[] {
  return ALL_TOOLS.map((t) => ({
    name: t.name,
    title: t.title,
    description: config && t.configNote ? `${t.description} ${t.configNote(config)}` : t.description,
    inputSchema: jsonSchema(t.input, 'input'),
    outputSchema: jsonSchema(t.output, 'output'),
    annotations: { title: t.title, ...t.annotations },
  }));
}

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io }) as Record<string, unknown>;
  return rest;
}

/**
 * Destroys the session's sandboxes that no task retains (now, or once an in-flight start fails);
 * with --keep-sandboxes, none: they live until their own deadline.
 */
export async function closeSession(deps: ServerDeps, session: Session): Promise<void> {
  const destroy = async (qualified: string): Promise<void> => {
    const ref = parseSandboxRef(qualified, deps.config.defaultProvider);
    try {
      await deps.providers.get(ref.provider).kill(ref.id);
    } catch (e) {
      if (!isProviderError(e) || e.category !== 'not_found')
        deps.log.warn('session cleanup failed', { category: isProviderError(e) ? e.category : 'internal' });
    }
  };
  const owned = session.close();
  if (deps.config.keepSandboxes) {
    if (owned.length) deps.log.info('session closed', { destroyed: 0, kept: owned.length });
    return;
  }
  const now = owned.filter((id) => deps.retention.mayDestroy(id, () => destroy(id)));
  await Promise.all(now.map(destroy));
  if (owned.length) deps.log.info('session closed', { destroyed: now.length, kept: owned.length - now.length });
}

/** Sends notifications/progress on the request's own stream, if the client sent a progress token. */
function progressNotifier(extra: RequestHandlerExtra<ServerRequest, ServerNotification>): ProgressNotifier | undefined {
  const progressToken = extra._meta?.progressToken;
  if (progressToken === undefined) return undefined;
  return (progress, message) => {
    // A client gone meanwhile is no failure of the call.
    extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress, message } }).catch(() => undefined);
  };
}

/** What createServer returns: the SDK server, its session, and the two ways to wire and end it. */
export interface SessionServer {
  server: Server;
  session: Session;
  /** Connects the transport, with requests of the wrong shape refused before the SDK sees them. */
  connect(transport: Transport): Promise<void>;
  /** The session's cleanup (once, however often called). */
  close(): Promise<void>;
}

/**
 * Routes a transport's requests through screenParams: a request whose params do not fit its
 * method is answered with a JSON-RPC error naming the field, where the SDK would answer a raw
 * zod dump as an internal error.
 */
function screenRequests(transport: Transport, deps: ServerDeps): void {
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const reply = isJSONRPCRequest(message) ? screenParams(message) : undefined;
    if (!reply) return deliver?.(message, extra);
    deps.log.info('refused a message', { reason: 'invalid_params' });
    transport.send(reply).catch(() => deps.log.warn('could not answer a refused message'));
  };
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
  serveToolsAndViews(server, listTools(deps.config));
  const inFlight = new Set<Promise<unknown>>();
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const call = callTool(deps, session, request.params.name, request.params.arguments, extra.signal, progressNotifier(extra));
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call)).catch(() => undefined);
    return call;
  });
  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    await closeSession(deps, session);
    // Calls still running (a create_sandbox, say) see the closed session and clean up after
    // themselves; wait for them, boundedly, so the process does not exit under them.
    await Promise.race([Promise.allSettled([...inFlight]), delay(IN_FLIGHT_GRACE_MS)]);
  };
  return {
    server,
    session,
    async connect(transport) {
      await server.connect(transport);
      screenRequests(transport, deps);
    },
    close: () => (closing ??= close()),
  };
}
