// The agent's requests as tests write them, typed by the protocol's own input type
// (shared/protocol.ts RequestSchema): a request's shape lives in its schema; its version, its op
// and the values most tests give it, here.
import { randomBytes } from 'node:crypto';
import { PROTOCOL_VERSION, type AgentRequestInput } from '../../shared/protocol.js';

/** A fresh task id (32 lowercase hex). */
export const newTaskId = (): string => randomBytes(16).toString('hex');

/** The request of operation `Op`, as a caller writes it (defaults may be omitted). */
export type RequestOf<Op extends AgentRequestInput['op']> = Extract<AgentRequestInput, { op: Op }>;

/** What a request of `Op` carries besides its version, its op and the fields `Given` a builder takes apart. */
type Fields<Op extends AgentRequestInput['op'], Given extends string> = Partial<Omit<RequestOf<Op>, 'protocol' | 'op' | Given>>;
/** An exec's fields besides its command. */
export type ExecFields = Fields<'exec', 'command'>;
/** A start's fields besides its command. */
export type StartFields = Fields<'start', 'command'>;

/** An `exec` of `command` with a 30 s timeout and 64 KiB of output each way, unless `fields` say otherwise. */
export function execRequest(command: string, fields: ExecFields = {}): RequestOf<'exec'> {
  return { protocol: PROTOCOL_VERSION, op: 'exec', command, timeout_ms: 30_000, max_output_bytes: 65_536, ...fields };
}

/** A `start` of `command` as a fresh task, unless `fields` name its id. */
export function startRequest(command: string, fields: StartFields = {}): RequestOf<'start'> {
  return { protocol: PROTOCOL_VERSION, op: 'start', task_id: newTaskId(), command, ...fields };
}

/** A `get` of task `taskId`, with `fields` (offsets, wait_s, …). */
export function getRequest(taskId: string, fields: Fields<'get', 'task_id'> = {}): RequestOf<'get'> {
  return { protocol: PROTOCOL_VERSION, op: 'get', task_id: taskId, ...fields };
}

/** A `cancel` of task `taskId`, with `fields` (the offsets of the view it answers with). */
export function cancelRequest(taskId: string, fields: Fields<'cancel', 'task_id'> = {}): RequestOf<'cancel'> {
  return { protocol: PROTOCOL_VERSION, op: 'cancel', task_id: taskId, ...fields };
}

/** An `input` of `data` to task `taskId`'s stdin, with `fields` (eof). */
export function inputRequest(
  taskId: string,
  data: string,
  fields: Fields<'input', 'task_id' | 'data' | 'data_on_stdin'> = {},
): RequestOf<'input'> {
  return { protocol: PROTOCOL_VERSION, op: 'input', task_id: taskId, data, ...fields };
}

/** A `hello`. */
export function helloRequest(): RequestOf<'hello'> {
  return { protocol: PROTOCOL_VERSION, op: 'hello' };
}

/** A `list` of the tasks. */
export function listRequest(): RequestOf<'list'> {
  return { protocol: PROTOCOL_VERSION, op: 'list' };
}

/** A `remove` of task `taskId`'s directory. */
export function removeRequest(taskId: string): RequestOf<'remove'> {
  return { protocol: PROTOCOL_VERSION, op: 'remove', task_id: taskId };
}
