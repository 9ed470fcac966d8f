// What a transport lets through to the MCP SDK: one JSON-RPC 2.0 message with a well-formed
// envelope and, for the methods this server answers, params of the shape the SDK expects. Anything
// else is refused with a JSON-RPC error naming the problem — never a value — wherever the protocol
// allows a reply (a request whose id can be read). Left to itself the SDK drops such a message
// without an answer (stdio) or answers with a raw zod dump as an internal error.
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  ErrorCode,
  InitializeRequestSchema,
  isJSONRPCRequest,
  JSONRPCMessageSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  PingRequestSchema,
  ReadResourceRequestSchema,
  type JSONRPCErrorResponse,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import type * as z from 'zod';
import { describeIssue } from '../../../shared/protocol.js';
import { definedFields } from '../../util/defined-fields.js';
import type { Logger } from '../../util/log.js';

/** A JSON-RPC error response; `id` only when the refused message's id could be read. */
export function errorReply(id: RequestId | undefined, code: number, message: string): JSONRPCErrorResponse {
  return { jsonrpc: '2.0', ...definedFields({ id }), error: { code, message } };
}

/** A refused message: a static reason for the log, and the reply when the protocol allows one. */
export type Refused = { ok: false; reason: string; reply?: JSONRPCErrorResponse };
/** The outcome of screening one incoming message: pass it on, or refuse it. */
export type Screened = { ok: true; message: JSONRPCMessage } | Refused;

/** A request id as JSON-RPC and MCP allow it: a string or an integer. */
export function asRequestId(value: unknown): RequestId | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
  return undefined;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/**
 * Decides whether a refusal may be answered, from what could be read of the message: a request
 * (method and id) is answered with its id; a notification (method, no id) and a response (id, no
 * method) never are; a message with neither is answered without an id.
 */
export function refusal(id: RequestId | undefined, hasMethod: boolean, code: number, message: string, reason: string): Refused {
  const isAnswerable = hasMethod ? id !== undefined : id === undefined;
  return isAnswerable ? { ok: false, reason, reply: errorReply(id, code, message) } : { ok: false, reason };
}

/** Checks one parsed JSON value against the JSON-RPC 2.0 envelope MCP uses. */
export function screenEnvelope(raw: unknown): Screened {
  if (!isPlainObject(raw)) {
    return refusal(
      undefined,
      false,
      ErrorCode.InvalidRequest,
      'Invalid Request: a message must be one JSON object (batches are not supported)',
      'not_an_object',
    );
  }
  const hasMethod = Object.hasOwn(raw, 'method');
  const id = asRequestId(raw.id);
  const invalid = (problem: string) => refusal(id, hasMethod, ErrorCode.InvalidRequest, `Invalid Request: ${problem}`, 'invalid_envelope');
  if (Object.hasOwn(raw, 'id') && id === undefined) {
    // An unreadable id cannot be answered with, so the reply carries none (JSON-RPC 2.0, section 5).
    return refusal(
      undefined,
      false,
      ErrorCode.InvalidRequest,
      'Invalid Request: field `id` must be a string or an integer',
      'invalid_envelope',
    );
  }
  if (raw.jsonrpc !== '2.0') return invalid('field `jsonrpc` must be "2.0"');
  if (hasMethod && (typeof raw.method !== 'string' || raw.method === '')) return invalid('field `method` must be a non-empty string');
  if (Object.hasOwn(raw, 'params') && !isPlainObject(raw.params)) return invalid('field `params` must be an object');
  const parsed = JSONRPCMessageSchema.safeParse(raw);
  if (!parsed.success) return invalid('the message is not a JSON-RPC 2.0 request, notification or response');
  return { ok: true, message: parsed.data };
}

/**
 * The SDK's schema for each request method this server answers: its params are checked before the
 * SDK sees them. A Map, as the SDK's own handler table is: the method is the caller's text, and on
 * a plain object `constructor` or `toString` would find Object.prototype's members.
 */
const REQUEST_SCHEMAS = new Map<string, z.ZodType>([
  ['initialize', InitializeRequestSchema],
  ['ping', PingRequestSchema],
  ['tools/list', ListToolsRequestSchema],
  ['tools/call', CallToolRequestSchema],
  // The MCP App task view (mcp/apps.ts).
  ['resources/list', ListResourcesRequestSchema],
  ['resources/read', ReadResourceRequestSchema],
]);

/** MCP's own field names, which may be shown in an error (other keys are caller data). */
const PROTOCOL_FIELDS = new Set([
  'params',
  'arguments',
  'name',
  'cursor',
  'protocolVersion',
  'capabilities',
  'clientInfo',
  'version',
  '_meta',
  'task',
  'uri',
]);

/** A JSON-RPC error for a request whose params do not fit its method, or undefined when they do (or the method is not ours). */
export function screenParams(request: JSONRPCRequest): JSONRPCErrorResponse | undefined {
  const schema = REQUEST_SCHEMAS.get(request.method);
  if (!schema) return undefined;
  const { jsonrpc: _jsonrpc, id: _id, ...body } = request;
  const checked = schema.safeParse(body);
  if (checked.success) return undefined;
  return errorReply(request.id, ErrorCode.InvalidParams, `Invalid params: ${describeIssue(checked.error, body, PROTOCOL_FIELDS)}`);
}

/**
 * Routes a transport's requests through screenParams: a request whose params do not fit its
 * method is answered with a JSON-RPC error naming the field, where the SDK would answer a raw
 * zod dump as an internal error. Call it after the SDK connected the transport (it wraps the
 * SDK's onmessage).
 */
export function screenRequests(transport: Transport, log: Logger): void {
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const reply = isJSONRPCRequest(message) ? screenParams(message) : undefined;
    if (!reply) return deliver?.(message, extra);
    log.info('refused a message', { reason: 'invalid_params' });
    transport.send(reply).catch(() => log.warn('could not answer a refused message'));
  };
}
