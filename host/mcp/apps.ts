// The MCP Apps extension (io.modelcontextprotocol/ui, protocol 2026-01-26): the task view as a
// ui:// resource, and the `_meta.ui.resourceUri` that links a tool to it. Only a client that
// advertised the extension at initialize sees either: every other client gets exactly the
// tools/list and results it got before. The constants are the extension's; a unit test pins them
// to the ext-apps package's own exports, so the server never loads that package at run time.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import {
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  type ClientCapabilities,
} from '@modelcontextprotocol/sdk/types.js';
import { distDir } from '../util/dist-files.js';

/** The extension's id in `capabilities.extensions`. */
export const APPS_EXTENSION_ID = 'io.modelcontextprotocol/ui';
/** The MIME type of an MCP App's HTML. */
export const APP_MIME_TYPE = 'text/html;profile=mcp-app';
/** The older, flat key some hosts read; set beside `_meta.ui.resourceUri`. */
export const LEGACY_RESOURCE_URI_KEY = 'ui/resourceUri';

/** The task view: a task's live output and state, with cancel (built to dist/task-view.html). */
export const TASK_VIEW_URI = 'ui://sandbox-mcp/task-view.html';
const TASK_VIEW_FILE = 'task-view.html';

/**
 * The tools whose results the task view renders: those that start or read a task, and the
 * commands that may become one (background_after). A host shows the view for every call of these.
 */
export const TASK_VIEW_TOOLS: readonly string[] = ['run_command', 'run_code', 'start_task', 'get_task'];

/** MCP's "resource not found" error code (the resources section of the specification). */
export const RESOURCE_NOT_FOUND = -32002;

/** True when the client said at initialize that it renders MCP Apps HTML. */
export function rendersApps(capabilities: ClientCapabilities | undefined): boolean {
  const extensions = (capabilities as { extensions?: Record<string, { mimeTypes?: unknown } | undefined> } | undefined)?.extensions;
  const mimeTypes = extensions?.[APPS_EXTENSION_ID]?.mimeTypes;
  return Array.isArray(mimeTypes) && mimeTypes.includes(APP_MIME_TYPE);
}

/** The `_meta` of a tools/list entry that links the tool to the view at `uri`. */
export function viewMeta(uri: string): Record<string, unknown> {
  return { ui: { resourceUri: uri }, [LEGACY_RESOURCE_URI_KEY]: uri };
}

/** The resources/list entry of the task view. */
export const TASK_VIEW_RESOURCE = {
  uri: TASK_VIEW_URI,
  name: 'task-view',
  title: 'Task output',
  description: "A background task's live output and state, with a cancel button.",
  mimeType: APP_MIME_TYPE,
} as const;

let cachedHtml: string | undefined;

/** The resources/read contents of the task view: one self-contained HTML file, read once per process. */
export function taskViewContents(): { uri: string; mimeType: string; text: string; _meta: Record<string, unknown> } {
  cachedHtml ??= readFileSync(join(distDir(), TASK_VIEW_FILE), 'utf8');
  return { uri: TASK_VIEW_URI, mimeType: APP_MIME_TYPE, text: cachedHtml, _meta: { ui: { prefersBorder: true } } };
}

/** The tools/list entries with the `_meta` that links each tool of TASK_VIEW_TOOLS to the task view. */
export function withViewMeta<T extends { name: string }>(tools: readonly T[]): (T & { _meta?: Record<string, unknown> })[] {
  return tools.map((t) => (TASK_VIEW_TOOLS.includes(t.name) ? { ...t, _meta: viewMeta(TASK_VIEW_URI) } : t));
}

/**
 * Answers tools/list (`listedTools()`, read at every listing, with the views' `_meta` for a client
 * that renders apps), and resources/list and resources/read (the task view, for such a client).
 * Decided per request: a client's capabilities are known only after initialize. `server` must
 * declare the `resources` capability before it connects.
 */
export function serveToolsAndViews(server: Server, listedTools: () => readonly { name: string }[]): void {
  const hasViews = () => rendersApps(server.getClientCapabilities());
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const tools = listedTools();
    return { tools: hasViews() ? withViewMeta(tools) : [...tools] };
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({ resources: hasViews() ? [TASK_VIEW_RESOURCE] : [] }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    // The uri is the caller's: never echoed.
    if (request.params.uri !== TASK_VIEW_URI) throw new McpError(RESOURCE_NOT_FOUND, 'Resource not found');
    return { contents: [taskViewContents()] };
  });
}
