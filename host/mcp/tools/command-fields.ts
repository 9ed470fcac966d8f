// The input fields run_command, run_code and start_task share, written once: the command, its
// working directory and the exec timeout; and the sandbox paths the file tools take (a file's, a
// directory's), with the path rule told the model in the same words. The exec timeout's maximum
// is the task's, because a call promoted by background_after goes on as a task with the call's
// timeout.
import * as z from 'zod';
import { LIMITS } from '../../../shared/limits.js';
import { resolveSandboxPath, SANDBOX_HOME } from '../../providers/provider.js';
import { intIn } from './tool.js';

/** The longest working directory (or file path) a tool accepts, in characters: Linux's PATH_MAX. */
export const PATH_MAX_CHARS = 4096;

/** run_command's and run_code's timeout when a call gives none, in seconds. */
export const EXEC_TIMEOUT_DEFAULT_S = 60;

/**
 * No command, path or working directory can hold a NUL byte (the kernel takes them as C strings):
 * refused with the other input checks, naming the field, before any provider call.
 */
const noNulByte = <T extends z.ZodString>(schema: T) => schema.refine((s) => !s.includes('\0'), { params: { no_nul_byte: true } });

/** A shell command, as run_command and start_task take it. */
export const CommandSchema = noNulByte(z.string().min(1).max(LIMITS.commandMaxChars)).describe('Shell command (bash -c).');

/** The path rule (provider.ts resolveSandboxPath), as a field description tells it. */
export const PATH_RULE_TEXT = `~ and relative paths resolve against the sandbox home (${SANDBOX_HOME}); . and .. are normalised away (/tmp/a/../b is /tmp/b, ~/x/.. is the home).`;

/**
 * The path of a file in a sandbox, as read_file, write_file, upload_file and download_file take
 * it. A trailing /, or a last name . or .., names a directory (POSIX refuses `echo x > dir/`), and
 * the path rule would normalise it away and write a file named `dir`: refused with the other input
 * checks, naming the field.
 */
export const FilePathSchema = noNulByte(z.string().min(1).max(PATH_MAX_CHARS))
  .refine((s) => !NAMES_DIRECTORY.test(s), { params: { names_directory: true } })
  .describe(`Path of the file in the sandbox (not ending in /, . or .., which name a directory): ${PATH_RULE_TEXT}`);

/** A path whose spelling names a directory: a trailing /, or a last name . or .. */
const NAMES_DIRECTORY = /(?:\/|(?:^|\/)\.\.?)$/;

/** The path of a directory in a sandbox, as list_files takes it (a trailing / is welcome). */
export const DirectoryPathSchema = noNulByte(z.string().min(1).max(PATH_MAX_CHARS)).describe(
  `Path of the directory in the sandbox: ${PATH_RULE_TEXT}`,
);

/** An optional working directory, resolved by the sandbox path rule. */
export const CwdSchema = noNulByte(z.string().min(1).max(PATH_MAX_CHARS))
  .optional()
  .describe(`Working directory (default: the sandbox's workspace when it has one, else the sandbox home): ${PATH_RULE_TEXT}`);

/**
 * A working directory by the path rule, for a call whose command the agent starts (a task, a
 * promoted call): the agent takes the path as given, so the host resolves it first.
 */
export function resolveCwd(cwd: string | undefined): string | undefined {
  return cwd !== undefined ? resolveSandboxPath(cwd) : undefined;
}

/** run_command's and run_code's timeout: 1 s up to the task maximum (a promoted call's timeout becomes its task's). */
export const ExecTimeoutSchema = intIn(1, LIMITS.taskTimeoutMaxS)
  .default(EXEC_TIMEOUT_DEFAULT_S)
  .describe(
    `Seconds (1-${LIMITS.taskTimeoutMaxS}, default ${EXEC_TIMEOUT_DEFAULT_S}) before the command's whole process group is killed (timed_out: true).`,
  );
