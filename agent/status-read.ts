// Reading a task's status file, validated against its schema and format version.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { STATUS_FORMAT_VERSION, TaskStatusSchema, type TaskStatus } from '../shared/status.js';
import { TASK_FILES } from './paths.js';

/** The outcome of reading a status file. */
export type StatusRead = { kind: 'ok'; status: TaskStatus } | { kind: 'missing' } | { kind: 'invalid'; message: string };

/** Reads and validates the task's status file; never throws for a missing or malformed file. */
export function readStatus(dir: string): StatusRead {
  let text: string;
  try {
    text = readFileSync(join(dir, TASK_FILES.status), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'missing' };
    return { kind: 'invalid', message: 'the status file cannot be read' };
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return { kind: 'invalid', message: 'the status file is not valid JSON' };
  }
  const format = (raw as { format?: unknown } | null)?.format;
  if (format !== STATUS_FORMAT_VERSION) {
    return {
      kind: 'invalid',
      message: `status format ${typeof format === 'number' ? format : '(none)'} is not supported by this agent (expects ${STATUS_FORMAT_VERSION})`,
    };
  }
  const parsed = TaskStatusSchema.safeParse(raw);
  if (!parsed.success) return { kind: 'invalid', message: 'the status file does not match its format' };
  return { kind: 'ok', status: parsed.data };
}
