// The input fields run_command, run_code and start_task share, written once: the command, its
// working directory and the exec timeout. The exec timeout's maximum is the task's, because a
// call promoted by background_after goes on as a task with the call's timeout.
import * as z from 'zod';
import { LIMITS } from '../../../shared/limits.js';
import { intIn } from './tool.js';

/** The longest working directory (or file path) a tool accepts, in characters: Linux's PATH_MAX. */
export const PATH_MAX_CHARS = 4096;

/** run_command's and run_code's timeout when a call gives none, in seconds. */
export const EXEC_TIMEOUT_DEFAULT_S = 60;

/** A shell command, as run_command and start_task take it. */
export const CommandSchema = z.string().min(1).max(LIMITS.commandMaxChars).describe('Shell command (bash -c).');

/** An optional working directory, resolved by the sandbox path rule. */
export const CwdSchema = z
  .string()
  .min(1)
  .max(PATH_MAX_CHARS)
  .optional()
  .describe('Working directory (relative paths and ~ are under the sandbox home).');

/** run_command's and run_code's timeout: 1 s up to the task maximum (a promoted call's timeout becomes its task's). */
export const ExecTimeoutSchema = intIn(1, LIMITS.taskTimeoutMaxS).default(EXEC_TIMEOUT_DEFAULT_S);
