// One MCP server per session, shared by both transports: the seeds' fifteen tools and the later
// ones, strict input validation (naming the field, never echoing the value), structured results,
// and the session's cleanup. Tool failures are `isError` results; only protocol misuse is a JSON-RPC error.
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod';
import { describeIssue } from '../shared/protocol.js';
import { ProviderError, isProviderError } from './errors.js';
import { SANDBOX_LIFETIME_DEFAULT_S } from './providers/provider.js';
import { parseSandboxRef } from './sandbox-ref.js';
import { Session } from './session.js';
import { execTools } from './tools/exec.js';
import { fileTools } from './tools/files.js';
import { sandboxTools } from './tools/sandboxes.js';
import { networkSummary, networkTools } from './tools/network.js';
import { taskTools } from './tools/tasks.js';
import type { ServerConfig } from './config.js';
import type { ServerDeps } from './server-deps.js';
import type { ToolDef } from './tools/tool.js';
import { definedFields } from './util/defined-fields.js';

declare const __HOST_VERSION__: string;
const VERSION = typeof __HOST_VERSION__ === 'string' ? __HOST_VERSION__ : '0.0.0-dev';

/** Every tool, in the order tools/list shows them. */
export const ALL_TOOLS: readonly ToolDef[] = [
  ...sandboxTools,
  ...execTools,
  ...fileTools,
  ...taskTools,
  ...networkTools,
] as unknown as ToolDef[];

/** What the initialize result tells a model about the workflow (instructionsFor adds the network). */
export const INSTRUCTIONS = [
  'sandbox-mcp gives you Linux sandboxes. Workflow:',
  '1. create_sandbox (it becomes your default; sandboxes you create are destroyed when this session ends, unless you started a task in them).',
  `   A sandbox lives \`timeout\` seconds (default ${SANDBOX_LIFETIME_DEFAULT_S}) and tasks never extend it: for long tasks create it with a longer timeout or call set_sandbox_timeout.`,
  '2. run_command / run_code for short synchronous work (clients often cut calls at about 60 s); files with read_file, write_file, list_files, upload_file, download_file.',
  '3. For long work, start_task and SAVE both sandbox_id and task_id: they keep working across disconnects and server restarts.',
  '4. Read output with get_task, passing the returned stdout_next_offset / stderr_next_offset each time; use wait (up to 30 s) instead of polling in a loop.',
  '5. cancel_task stops a task; when finished, destroy retained sandboxes with kill_sandbox.',
].join('\n');

/** The initialize instructions under `config`: the workflow, then the network its sandboxes have. */
export function instructionsFor(config: ServerConfig): string {
  return `${INSTRUCTIONS}\n${networkSummary(config)}`;
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
): Promise<CallToolResult> {
  const tool = toolsByName.get(name);
  if (!tool) throw new McpError(ErrorCode.InvalidParams, 'unknown tool');
  return runTool(tool, deps, session, args, signal);
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
): Promise<CallToolResult> {
  const name = tool.name;
  const started = Date.now();
  const parsed = tool.input.safeParse(args ?? {});
  if (!parsed.success) {
    deps.log.info('tool call', { tool: name, outcome: 'invalid_argument' });
    return errorResult(new ProviderError('invalid_argument', { detail: describeIssue(parsed.error, args ?? {}) }));
  }
  try {
    const { result, content = [] } = await tool.run(parsed.data, { deps, session, ...definedFields({ signal }) });
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

/** Destroys the session's sandboxes that no task retains (now, or once an in-flight start fails). */
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
  const now = owned.filter((id) => deps.retention.mayDestroy(id, () => destroy(id)));
  await Promise.all(now.map(destroy));
  if (owned.length) deps.log.info('session closed', { destroyed: now.length, kept: owned.length - now.length });
}

/** A low-level MCP Server wired to one session. */
export function createServer(deps: ServerDeps): { server: Server; session: Session; close: () => Promise<void> } {
  const session = new Session();
  const server = new Server(
    { name: 'sandbox-mcp', version: VERSION },
    { capabilities: { tools: {} }, instructions: instructionsFor(deps.config) },
  );
  const tools = listTools(deps.config);
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
  const inFlight = new Set<Promise<unknown>>();
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const call = callTool(deps, session, request.params.name, request.params.arguments, extra.signal);
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
  return { server, session, close: () => (closing ??= close()) };
}
