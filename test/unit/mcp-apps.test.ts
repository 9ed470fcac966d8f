// The MCP Apps extension's constants, written in mcp/apps.ts so the server never loads the
// ext-apps package at run time, pinned here to that package's own exports; which clients get the
// views, and which tools link to the task view.
import { EXTENSION_ID, RESOURCE_MIME_TYPE, RESOURCE_URI_META_KEY, getUiCapability } from '@modelcontextprotocol/ext-apps/server';
import { describe, expect, it } from 'vitest';
import {
  APP_MIME_TYPE,
  APPS_EXTENSION_ID,
  LEGACY_RESOURCE_URI_KEY,
  rendersApps,
  TASK_VIEW_RESOURCE,
  TASK_VIEW_URI,
  withViewMeta,
} from '../../host/mcp/apps.js';

describe('the MCP Apps extension', () => {
  it("uses the ext-apps package's own identifiers", () => {
    expect(APPS_EXTENSION_ID).toBe(EXTENSION_ID);
    expect(APP_MIME_TYPE).toBe(RESOURCE_MIME_TYPE);
    expect(LEGACY_RESOURCE_URI_KEY).toBe(RESOURCE_URI_META_KEY);
    expect(TASK_VIEW_RESOURCE.mimeType).toBe(RESOURCE_MIME_TYPE);
    expect(TASK_VIEW_URI).toMatch(/^ui:\/\//);
  });

  it('renders views only for a client that advertised the extension with its MIME type', () => {
    const advertised = { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } };
    expect(rendersApps(advertised as never)).toBe(true);
    expect(getUiCapability(advertised as never)).toEqual({ mimeTypes: [RESOURCE_MIME_TYPE] });
    expect(rendersApps(undefined)).toBe(false);
    expect(rendersApps({})).toBe(false);
    expect(rendersApps({ extensions: { [EXTENSION_ID]: {} } } as never)).toBe(false);
    expect(rendersApps({ extensions: { [EXTENSION_ID]: { mimeTypes: ['text/html'] } } } as never)).toBe(false);
  });

  it('links exactly start_task, get_task, run_command and run_code to the task view, leaving the other entries as they were', () => {
    const tools = ['create_sandbox', 'run_command', 'run_code', 'start_task', 'get_task', 'cancel_task'].map((name) => ({ name }));
    const linked = withViewMeta(tools);
    expect(linked.filter((t) => t._meta).map((t) => t.name)).toEqual(['run_command', 'run_code', 'start_task', 'get_task']);
    expect(linked[1]!._meta).toEqual({ ui: { resourceUri: TASK_VIEW_URI }, [RESOURCE_URI_META_KEY]: TASK_VIEW_URI });
    expect(linked[0]).toBe(tools[0]);
  });
});
