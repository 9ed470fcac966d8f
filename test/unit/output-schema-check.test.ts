// The server checks every tool result against the tool's output schema before answering: a
// result of the wrong shape becomes an `internal` error result and a log line naming the tool
// and the field, never a malformed answer and never a value.
import * as z from 'zod';
import { describe, expect, it } from 'vitest';
import { AgentClient } from '../../host/tasks/agent-client.js';
import { BACKGROUND_AFTER_DEFAULT_S } from '../../host/config/config.js';
import { createLogger } from '../../host/util/log.js';
import { SecretMasker } from '../../host/mcp/mask.js';
import { TaskRetention } from '../../host/tasks/retention.js';
import { OwnerCache } from '../../host/access/owner-scope.js';
import { WorkspacePaths } from '../../host/tasks/workspace-changes.js';
import { WaitGate } from '../../host/tasks/wait-gate.js';
import type { ServerDeps } from '../../host/mcp/server-deps.js';
import { runTool } from '../../host/mcp/tool-call.js';
import { Session } from '../../host/mcp/session.js';
import { defineTool, type ToolDef } from '../../host/mcp/tools/tool.js';

const VALUE = 'VALUE-that-must-not-be-logged';

function depsLoggingTo(lines: string[]): ServerDeps {
  return {
    config: { defaultProvider: 'local', localNetwork: 'isolated', e2b: {}, backgroundAfterS: BACKGROUND_AFTER_DEFAULT_S, secretValues: [] },
    providers: {
      get: () => {
        throw new Error('no provider in this test');
      },
    },
    agent: new AgentClient({ bytes: Buffer.from(''), fileName: 'agent-test.cjs', version: 'test' }),
    masker: new SecretMasker(),
    retention: new TaskRetention(),
    waits: new WaitGate(4),
    owners: new OwnerCache(),
    workspaces: new WorkspacePaths(),
    log: createLogger({ write: (line) => lines.push(line) }),
  };
}

/** A tool declaring `{ path: string, size: int }` whose run returns `result` as is. */
function toolReturning(result: unknown): ToolDef {
  return defineTool({
    name: 'shape_probe',
    title: 'Shape probe',
    description: 'Returns a fixed result.',
    input: z.strictObject({}),
    output: z.strictObject({ path: z.string(), size: z.number().int() }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    run: async () => ({ result: result as { path: string; size: number } }),
  }) as unknown as ToolDef;
}

describe('output schema check', () => {
  it('answers a well-shaped result as structured content', async () => {
    const lines: string[] = [];
    const r = await runTool(toolReturning({ path: VALUE, size: 3 }), { deps: depsLoggingTo(lines), session: new Session() }, {});
    expect(r.isError).toBeUndefined();
    expect(r.structuredContent).toEqual({ path: VALUE, size: 3 });
  });

  it.each([
    ['a wrong type', { path: VALUE, size: 'three' }, 'size'],
    ['a missing field', { path: VALUE }, 'size'],
    ['an undeclared field', { path: VALUE, size: 3, extra: VALUE }, 'extra'],
    ['a float for an integer', { path: VALUE, size: 1.5 }, 'size'],
    ['no object at all', VALUE, undefined],
  ])('turns %s into an internal error result and logs the tool and field, never a value', async (_what, result, field) => {
    const lines: string[] = [];
    const r = await runTool(toolReturning(result), { deps: depsLoggingTo(lines), session: new Session() }, {});
    expect(r.isError).toBe(true);
    expect(r.structuredContent).toBeUndefined();
    expect(r.content).toHaveLength(1);
    const error = JSON.parse((r.content[0] as { text: string }).text).error;
    expect(error).toMatchObject({ category: 'internal', code: 'output_schema_mismatch' });
    expect(JSON.stringify(r)).not.toContain(VALUE);

    const log = lines.map((l) => JSON.parse(l));
    const mismatch = log.find((l) => l.msg === 'tool result does not match its output schema');
    expect(mismatch).toMatchObject({ level: 'warn', tool: 'shape_probe' });
    if (field) expect(mismatch.issue).toContain(`\`${field}\``);
    expect(log.find((l) => l.msg === 'tool call')).toMatchObject({ tool: 'shape_probe', outcome: 'internal' });
    expect(lines.join('')).not.toContain(VALUE);
  });
});
