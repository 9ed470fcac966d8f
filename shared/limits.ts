/** Protocol limits, shared by the host's tool schemas, the agent and the tests. */
export const LIMITS = {
  /** Each task stream keeps at most this many bytes; excess is drained and dropped. */
  streamCapBytes: 1024 * 1024,
  /**
   * Of a stream longer than streamCapBytes, the supervisor also keeps (masked) its last this many
   * bytes: the tail half of a run_command result, so that a call that ends within background_after
   * shows how its output really ended.
   */
  streamTailBytes: 32 * 1024,
  /** Default and maximum page size per stream for get/cancel. */
  pageDefaultBytes: 16384,
  pageMaxBytes: 65536,
  /** Longest accepted command text, in characters. */
  commandMaxChars: 65536,
  /** A task's command as `list` reports it: at most this many characters (then `command_truncated`). */
  listCommandMaxChars: 2048,
  /** Task timeout bounds and default, in seconds. */
  taskTimeoutMaxS: 3600,
  taskTimeoutDefaultS: 300,
  /** get's long-poll bound, in seconds. */
  waitMaxS: 30,
  /** Task directories per sandbox OS user. */
  maxTasks: 128,
  /** Encoded request (JSON + base64 + quoting) cap, checked before contacting a provider. */
  encodedRequestMaxBytes: 96 * 1024,
  /** cancel waits at most this long for a confirmed terminal state. */
  cancelConfirmMs: 3000,
  /**
   * Largest `data` of one `input` request, in UTF-8 bytes: half a pipe's default capacity, and
   * small enough that ordinary text stays under encodedRequestMaxBytes once JSON-escaped and base64'd.
   */
  inputMaxBytes: 32 * 1024,
  /**
   * The most bytes one `envs` (create_sandbox's, run_command's) may take as NAME=value strings:
   * far below the kernel's 2 MiB for a command's arguments and environment together (and its
   * 128 KiB for one string), with room for both sets and the command itself.
   */
  envsMaxBytes: 64 * 1024,
  /** Secret values shorter than this are not masked (they would mask ordinary text). */
  secretMinBytes: 4,
} as const;

/** The fixed marker that replaces a masked secret value. */
export const SECRET_MARKER = '[MASKED]';

/** An environment variable whose name matches this holds a secret worth masking. */
export const SECRET_NAME_PATTERN = /KEY|TOKEN|SECRET|PASSWORD/i;

/** Bytes `envs` takes in a process's environment (NAME=value and a NUL each): what LIMITS.envsMaxBytes bounds. */
export function envsBytes(envs: Readonly<Record<string, string>>): number {
  let n = 0;
  for (const [name, value] of Object.entries(envs)) n += Buffer.byteLength(name) + Buffer.byteLength(value) + 2;
  return n;
}

/**
 * A local sandbox's resident agent's quiet period: after this many seconds without a frame while
 * no call waits, its keeper ends its input (it exits) and starts it again when a server next needs
 * it (SANDBOX_MCP_RESIDENT_IDLE_EXIT_S). A minute: an agent between bursts of calls keeps it, an
 * idle sandbox then holds only its keeper, and the call after a longer pause pays one resident
 * start (about 0.1 s: docs/performance.md).
 */
export const RESIDENT_IDLE_EXIT_DEFAULT_S = 60;
/** The longest quiet period a setting may give (and `serve --idle-exit-s` takes). */
export const RESIDENT_IDLE_EXIT_MAX_S = 86_400;
