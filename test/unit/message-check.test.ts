// The pieces that screen incoming JSON-RPC before the SDK sees it: the envelope check, the params
// check, the streaming scanner that finds an oversized message's id, and the reported bound of a
// number beyond the safe integers.
import { describe, expect, it } from 'vitest';
import * as z from 'zod';
import { describeIssue } from '../../shared/protocol.js';
import { EnvelopeScanner } from '../../host/mcp/transports/envelope-scanner.js';
import { screenEnvelope, screenParams } from '../../host/mcp/transports/message-check.js';
import { PROTOTYPE_KEYS } from '../support/prototype-keys.js';

function scan(text: string, pieceBytes = text.length): ReturnType<EnvelopeScanner['result']> {
  const scanner = new EnvelopeScanner();
  const bytes = Buffer.from(text, 'utf8');
  for (let at = 0; at < bytes.length; at += pieceBytes) scanner.feed(bytes.subarray(at, at + pieceBytes));
  return scanner.result();
}

describe('EnvelopeScanner', () => {
  it('finds a top-level id and method wherever they sit, in any split', () => {
    const last = '{"method":"tools/call","params":{"name":"x","arguments":{"id":99,"method":"no"}},"jsonrpc":"2.0","id":42}';
    const first = '{ "id" : "req-7" , "jsonrpc":"2.0", "method" : "ping", "params": {"a": [1, {"id": 3}]} }';
    for (const size of [1, 2, 7, 1000]) {
      expect(scan(last, size)).toEqual({ id: 42, method: 'tools/call' });
      expect(scan(first, size)).toEqual({ id: 'req-7', method: 'ping' });
    }
  });

  it('is not fooled by quotes, braces and keys inside strings', () => {
    const tricky = '{"params":{"content":"\\"}, \\"id\\": 5, {\\\\"},"method":"tools/call","note":"}\\"id\\":1","id":8}';
    expect(JSON.parse(tricky)).toMatchObject({ id: 8 });
    expect(scan(tricky, 3)).toEqual({ id: 8, method: 'tools/call' });
  });

  it('reports nothing it could not read as an id: objects, floats, missing', () => {
    expect(scan('{"id":{"x":1},"method":"m"}')).toEqual({ method: 'm' });
    expect(scan('{"id":1.5,"method":"m"}')).toEqual({ method: 'm' });
    expect(scan('{"method":"notifications/x"}')).toEqual({ method: 'notifications/x' });
    expect(scan('[{"id":1}]')).toEqual({});
    expect(scan(`{"id":"${'x'.repeat(1000)}","method":"m"}`)).toEqual({ method: 'm' });
  });
});

describe('screenEnvelope', () => {
  it('passes valid messages', () => {
    expect(screenEnvelope({ jsonrpc: '2.0', id: 1, method: 'ping' }).ok).toBe(true);
    expect(screenEnvelope({ jsonrpc: '2.0', method: 'notifications/initialized' }).ok).toBe(true);
    expect(screenEnvelope({ jsonrpc: '2.0', id: 'a', result: {} }).ok).toBe(true);
  });

  it('answers a malformed request with its id, never a notification or a response', () => {
    expect(screenEnvelope({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: null })).toEqual({
      ok: false,
      reason: 'invalid_envelope',
      reply: { jsonrpc: '2.0', id: 3, error: { code: -32600, message: 'Invalid Request: field `params` must be an object' } },
    });
    expect(screenEnvelope({ jsonrpc: '2.0', method: 'notifications/x', params: [] })).toEqual({ ok: false, reason: 'invalid_envelope' });
    expect(screenEnvelope({ jsonrpc: '2.0', id: 4, result: 'not-an-object' })).toEqual({ ok: false, reason: 'invalid_envelope' });
  });

  it('answers without an id when the id cannot be read', () => {
    const r = screenEnvelope({ jsonrpc: '2.0', id: { secret: 'VALUE' }, method: 'ping' });
    expect(r).toEqual({
      ok: false,
      reason: 'invalid_envelope',
      reply: { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid Request: field `id` must be a string or an integer' } },
    });
    expect(screenEnvelope([{ jsonrpc: '2.0', id: 1, method: 'ping' }])).toMatchObject({ ok: false, reply: { error: { code: -32600 } } });
  });
});

describe('screenParams', () => {
  it('names the field of a request whose params do not fit its method, without echoing values', () => {
    const reply = screenParams({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: { name: 'x', arguments: ['SECRET-VALUE'] as never },
    });
    expect(reply).toEqual({
      jsonrpc: '2.0',
      id: 9,
      error: { code: -32602, message: 'Invalid params: field `params.arguments` must be an object' },
    });
    expect(
      screenParams({ jsonrpc: '2.0', id: 10, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {} } })?.error
        .message,
    ).toBe('Invalid params: field `params.clientInfo` is required');
    expect(screenParams({ jsonrpc: '2.0', id: 11, method: 'tools/call', params: { name: 'x', arguments: {} } })).toBeUndefined();
    expect(screenParams({ jsonrpc: '2.0', id: 12, method: 'not/ours', params: { anything: 1 } })).toBeUndefined();
  });

  it('screens the MCP App methods too: resources/read names a uri that is not a string, resources/list passes', () => {
    expect(screenParams({ jsonrpc: '2.0', id: 13, method: 'resources/read', params: { uri: 42 as never } })?.error).toEqual({
      code: -32602,
      message: 'Invalid params: field `params.uri` must be a string',
    });
    expect(screenParams({ jsonrpc: '2.0', id: 14, method: 'resources/read', params: {} })?.error.message).toBe(
      'Invalid params: field `params.uri` is required',
    );
    expect(screenParams({ jsonrpc: '2.0', id: 15, method: 'resources/read', params: { uri: 'ui://x' } })).toBeUndefined();
    expect(screenParams({ jsonrpc: '2.0', id: 16, method: 'resources/list' })).toBeUndefined();
  });

  it('passes a method named like an Object.prototype key on to the SDK (which answers -32601), never throwing', () => {
    for (const method of PROTOTYPE_KEYS) expect(screenParams({ jsonrpc: '2.0', id: 13, method }), method).toBeUndefined();
  });
});

describe('describeIssue', () => {
  const schema = z.strictObject({ timeout: z.number().int().min(1).max(3600) });
  it("reports the schema's own bound for numbers beyond the safe integers", () => {
    for (const [value, text] of [
      [1e308, 'field `timeout` is too large (maximum 3600)'],
      [-1e308, 'field `timeout` is too small (minimum 1)'],
      [5000, 'field `timeout` is too large (maximum 3600)'],
      [1.5, 'field `timeout` must be an integer'],
    ] as const) {
      const input = { timeout: value };
      expect(describeIssue(schema.safeParse(input).error!, input)).toBe(text);
    }
  });
});
