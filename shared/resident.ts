// The resident agent's transport (protocol minor 5): `node agent.cjs serve` reads request frames on
// its stdin and writes answers on its stdout, one JSON object per line. Locally the sandbox's
// keeper relays each server's connection to its Unix socket onto that one stream (renumbering
// ids); on e2b a server runs its own resident as a background command and speaks to it directly.
//   client -> resident  {"id":N,"request":{…AgentRequest…}}   N > 0, chosen by the client
//                       {"id":N,"abort":"cancelled"|"disconnected"}
//   resident -> client  {"id":0,"hello":{…ResidentHello…}}     first, on every connection
//                       {"id":N,"response":{…AgentResponse…}}  in any order
// Lines are ASCII (every other character \u-escaped), so a frame survives any chunking and any
// decoding on the way (envd hands output over decoded as UTF-8), and at most MAX_FRAME_BYTES long
// (frame-lines.ts: the line splitting, apart from the schemas, so that the keeper loads no zod).
import * as z from 'zod/mini';
import { lazySchema } from './lazy-schema.js';
import { HelloResultSchema, ResponseSchema } from './protocol.js';

/** Why a request is aborted: the caller gave up, or its connection is gone (the server went away). */
export const ABORT_REASONS = ['cancelled', 'disconnected'] as const;
export type AbortReason = (typeof ABORT_REASONS)[number];

const frameId = () => z.number().check(z.int(), z.minimum(1), z.maximum(Number.MAX_SAFE_INTEGER));

/** A frame a client sends: one request, or the abort of one still in flight. */
export const ClientFrameSchema = lazySchema(() =>
  z.union([z.strictObject({ id: frameId(), request: z.unknown() }), z.strictObject({ id: frameId(), abort: z.enum(ABORT_REASONS) })]),
);
export type ClientFrame = z.infer<typeof ClientFrameSchema>;

/**
 * The resident's greeting: what `hello` answers, plus its pid in the sandbox and whether it can
 * run an exec as a task that outlives the call (`promotable`: always, since the supervisor that a
 * start uses does it; see agent/resident-tasks.ts). The greeting is the version negotiation: a client checks `protocol`
 * and sends only the ops listed.
 */
export const ResidentHelloSchema = lazySchema(() =>
  z.extend(HelloResultSchema, {
    pid: z.number().check(z.int()),
    resident: z.literal(true),
    promotable: z.boolean(),
  }),
);
export type ResidentHello = z.infer<typeof ResidentHelloSchema>;

/**
 * A frame the resident sends: one answer or the greeting (id 0). The answer comes first: a union
 * tries its options in order, and every frame after the first is an answer (0.5 against 1.2 µs a
 * frame; the two never both fit).
 */
export const ResidentFrameSchema = lazySchema(() =>
  z.union([z.strictObject({ id: frameId(), response: ResponseSchema }), z.strictObject({ id: z.literal(0), hello: ResidentHelloSchema })]),
);
export type ResidentFrame = z.infer<typeof ResidentFrameSchema>;

/** JSON with every non-ASCII character \u-escaped: one line, whatever decodes it on the way. */
export function asciiJson(value: unknown): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
