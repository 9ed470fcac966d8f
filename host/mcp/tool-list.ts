// The tools this server offers, and their tools/list entries: JSON Schemas generated from the
// same zod schemas that validate calls, so the two cannot drift apart.
import * as z from 'zod';
import type { ServerConfig } from '../config/config.js';
import type { ServerDeps } from './server-deps.js';
import { execTools } from './tools/exec.js';
import { fileTools } from './tools/files.js';
import { networkTools } from './tools/network.js';
import { sandboxTools } from './tools/sandboxes.js';
import { snapshotTools } from './tools/snapshot.js';
import { taskTools } from './tools/tasks.js';
import type { ToolDef } from './tools/tool.js';
import { workspaceTools } from './tools/workspace.js';

/** Every tool, in the order tools/list shows them. */
export const ALL_TOOLS: readonly ToolDef[] = [
  ...sandboxTools,
  ...snapshotTools,
  ...execTools,
  ...fileTools,
  ...taskTools,
  ...networkTools,
  ...workspaceTools,
] as unknown as ToolDef[];

/** One tools/list entry. */
export interface ListedTool {
  name: string;
  title: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  annotations: Record<string, unknown>;
}

/** The tools/list entries under `config` (a tool's configNote adds what the configuration makes true). */
export function listTools(config?: ServerConfig): ListedTool[] {
  return ALL_TOOLS.map((t) => ({
    name: t.name,
    title: t.title,
    description: config && t.configNote ? `${t.description} ${t.configNote(config)}` : t.description,
    inputSchema: jsonSchema(t.input, 'input'),
    outputSchema: jsonSchema(t.output, 'output'),
    annotations: { title: t.title, ...t.annotations },
  }));
}

/** The listed tools with each tool's listNote read now, from `deps` (the rest of a listing never changes). */
export function withListNotes(tools: readonly ListedTool[], deps: ServerDeps): ListedTool[] {
  return tools.map((t) => {
    const note = ALL_TOOLS.find((d) => d.name === t.name)?.listNote?.(deps);
    return note ? { ...t, description: `${t.description} ${note}` } : t;
  });
}

// A schema's JSON Schema, made once per process: every session (each HTTP session has a server of
// its own) lists the same tools, and making them was about a third of the server's CPU for a session.
const JSON_SCHEMAS = {
  input: new WeakMap<z.ZodType, Record<string, unknown>>(),
  output: new WeakMap<z.ZodType, Record<string, unknown>>(),
};

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const made = JSON_SCHEMAS[io].get(schema);
  if (made) return made;
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io }) as Record<string, unknown>;
  JSON_SCHEMAS[io].set(schema, rest);
  return rest;
}
