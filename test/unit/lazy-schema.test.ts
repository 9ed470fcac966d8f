// Schemas built on first use (shared/lazy-schema.ts), and the agent's per-op request check
// (requestSchemaFor), which must answer exactly as RequestSchema does.
import { describe, expect, it } from 'vitest';
import * as z from 'zod/mini';
import { lazySchema } from '../../shared/lazy-schema.js';
import { RequestSchema, requestSchemaFor, TaskViewSchema } from '../../shared/protocol.js';

describe('lazySchema', () => {
  it('builds its schema on first use, once, and is that schema: parse, shape, instanceof, composed into another', () => {
    let builds = 0;
    const Point = lazySchema(() => {
      builds++;
      return z.strictObject({ x: z.number(), y: z._default(z.number(), 0) });
    });
    expect(builds).toBe(0);
    expect(Point.parse({ x: 1 })).toEqual({ x: 1, y: 0 });
    expect(Point.safeParse({ x: 'a' }).success).toBe(false);
    expect(Object.keys(Point.shape)).toEqual(['x', 'y']);
    expect(Point instanceof z.ZodMiniObject).toBe(true);
    const Line = z.strictObject({ from: Point, to: z.optional(Point) });
    expect(Line.parse({ from: { x: 1 }, to: { x: 2, y: 3 } })).toEqual({ from: { x: 1, y: 0 }, to: { x: 2, y: 3 } });
    expect(z.extend(Point, { z: z.number() }).parse({ x: 1, z: 2 })).toEqual({ x: 1, y: 0, z: 2 });
    expect(builds).toBe(1);
  });

  it("is what the protocol's schemas are, and the host's spread their shapes", () => {
    expect(Object.keys(z.strictObject({ sandbox_id: z.string(), ...TaskViewSchema.shape }).shape)).toContain('stdout_next_offset');
  });
});

describe('requestSchemaFor', () => {
  const taskId = '0123456789abcdef0123456789abcdef';
  const requests: unknown[] = [
    { protocol: 1, op: 'hello' },
    { protocol: 1, op: 'get', task_id: taskId },
    { protocol: 1, op: 'get', task_id: taskId, limit: 65537 },
    { protocol: 1, op: 'get', task_id: 'nope', sneaky: 1 },
    { protocol: 1, op: 'start', task_id: taskId, command: 'true', env: { A: 'b' }, bounds: { processes: 1 } },
    { protocol: 1, op: 'input', task_id: taskId, data: 'x', data_on_stdin: true },
    { protocol: 1, op: 'exec', command: 'true', timeout_ms: 10, max_output_bytes: 0 },
    { protocol: 1, op: 'read_file', path: '/etc/hostname', offset: 0, length: 10 },
    { protocol: 1, op: 'teleport' },
    { protocol: 1, op: '__proto__' },
    { protocol: 1, op: 'constructor' },
    { protocol: 1, op: 7 },
    { protocol: 1 },
    null,
    [1, 2],
  ];

  it('answers every request as RequestSchema does: the same data, or the same issues', () => {
    for (const request of requests) {
      expect(requestSchemaFor(request).safeParse(request), JSON.stringify(request)).toEqual(RequestSchema.safeParse(request));
    }
  });

  it("checks a request of a known op with that op's schema alone, and any other with RequestSchema", () => {
    expect(requestSchemaFor({ protocol: 1, op: 'get' })).not.toBe(RequestSchema);
    for (const op of ['teleport', '__proto__', 'constructor', 7, undefined])
      expect(requestSchemaFor({ protocol: 1, op })).toBe(RequestSchema);
    expect(requestSchemaFor(null)).toBe(RequestSchema);
  });
});
