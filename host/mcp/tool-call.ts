// One tools/call, from name to result: find the tool, validate its input, run it, check its result
// against its output schema, and shape the answer. A tool's failure is an `isError` result; only
// an unknown tool name is a JSON-RPC error (protocol misuse).
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { describeIssue } from '../../shared/protocol.js';
import { ProviderError, isProviderError } from '../providers/provider-error.js';
import { ALL_TOOLS } from './tool-list.js';
import type { ToolContext, ToolDef } from './tools/tool.js';

const toolsByName = new Map(ALL_TOOLS.map((t) => [t.name, t]));

function errorResult(e: ProviderError): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: e.toJSON() }) }] };
}

/** Runs one tool call by name in `ctx` (the session, the call's abort signal and progress). Never throws for tool-level failures. */
export async function callTool(ctx: ToolContext, name: string, args: unknown): Promise<CallToolResult> {
  const tool = toolsByName.get(name);
  if (!tool) throw new McpError(ErrorCode.InvalidParams, 'unknown tool');
  return runTool(tool, ctx, args);
}

/**
 * Runs one call of `tool`: its input is validated before it runs and its result against its
 * output schema before anyone sees it, so a client gets a result of the declared shape or an
 * error result, never a malformed answer. Never throws for tool-level failures.
 */
export async function runTool(tool: ToolDef, ctx: ToolContext, args: unknown): Promise<CallToolResult> {
  const { log } = ctx.deps;
  const name = tool.name;
  const startedAtMs = Date.now();
  const parsed = tool.input.safeParse(args ?? {});
  if (!parsed.success) {
    log.info('tool call', { tool: name, outcome: 'invalid_argument' });
    return errorResult(new ProviderError('invalid_argument', { detail: describeIssue(parsed.error, args ?? {}) }));
  }
  try {
    const { result, content = [] } = await tool.run(parsed.data, ctx);
    const checked = tool.output.safeParse(result);
    if (!checked.success) {
      // A bug of ours, not the caller's: name the tool and the field, never a value.
      log.warn('tool result does not match its output schema', { tool: name, issue: describeIssue(checked.error, result) });
      log.info('tool call', { tool: name, outcome: 'internal', ms: Date.now() - startedAtMs });
      return errorResult(new ProviderError('internal', { code: 'output_schema_mismatch' }));
    }
    log.info('tool call', { tool: name, outcome: 'ok', ms: Date.now() - startedAtMs });
    return { content: [{ type: 'text', text: JSON.stringify(result) }, ...content], structuredContent: result as Record<string, unknown> };
  } catch (e) {
    const error = isProviderError(e) ? e : new ProviderError('internal');
    // Only the error's class name: an unexpected exception's message may carry values or paths.
    log.info('tool call', {
      tool: name,
      outcome: error.category,
      ms: Date.now() - startedAtMs,
      ...(isProviderError(e) ? {} : { unexpected: e instanceof Error ? e.name : typeof e }),
    });
    return errorResult(error);
  }
}
