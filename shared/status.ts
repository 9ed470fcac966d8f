// The per-task status file the supervisor writes (atomically) and every agent call reads.
// It has its own format version, independent of the protocol's: an agent that meets a status
// format it does not know reports the task as `unknown` rather than guessing.
import * as z from 'zod/mini';
import { lazySchema } from './lazy-schema.js';
import { TaskIdSchema } from './protocol.js';

/** Version of the status file layout; bump on any incompatible change. */
export const STATUS_FORMAT_VERSION = 1;

/** Why a task stopped, or is stopping. The first reason recorded wins. */
export const TERMINATION_REASONS = ['exit', 'timeout', 'cancel', 'supervisor_error'] as const;
export type TerminationReason = (typeof TERMINATION_REASONS)[number];

/** States a status file can hold; `unknown` is a reader's verdict, never written. */
export const STATUS_STATES = ['running', 'succeeded', 'failed', 'cancelled', 'timed_out'] as const;

const int = () => z.number().check(z.int());

/** A process identified by pid plus its start time (field 22 of /proc/<pid>/stat, clock ticks). */
const ProcessRefSchema = lazySchema(() => z.object({ pid: int(), start_time: int() }));

export const TaskStatusSchema = lazySchema(() =>
  z.object({
    format: z.literal(STATUS_FORMAT_VERSION),
    task_id: TaskIdSchema,
    state: z.enum(STATUS_STATES),
    /** Set when termination begins (state may still be `running`); never changes afterwards. */
    reason: z.nullable(z.enum(TERMINATION_REASONS)),
    /** The supervisor process; null only when the supervisor could not be started at all. */
    supervisor: z.nullable(ProcessRefSchema),
    /** The command's process group: pgid is the group leader's pid. Null until spawned. */
    group: z.nullable(z.object({ pgid: int(), leader_start_time: int() })),
    /** Shell convention: the exit status, or 128+signal when the leader was killed by a signal. */
    exit_code: z.nullable(int()),
    signal: z.nullable(z.string()),
    started_at: z.nullable(int()),
    finished_at: z.nullable(int()),
    stdout_truncated: z.boolean(),
    stderr_truncated: z.boolean(),
    error: z.optional(z.object({ code: z.string(), message: z.string() })),
  }),
);
export type TaskStatus = z.infer<typeof TaskStatusSchema>;

/** A task's status before anything happened to it: running, with no process or outcome recorded. */
export function initialStatus(taskId: string): TaskStatus {
  return {
    format: STATUS_FORMAT_VERSION,
    task_id: taskId,
    state: 'running',
    reason: null,
    supervisor: null,
    group: null,
    exit_code: null,
    signal: null,
    started_at: null,
    finished_at: null,
    stdout_truncated: false,
    stderr_truncated: false,
  };
}
