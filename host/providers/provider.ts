// The one interface every sandbox provider implements. Ids here are the provider's own
// (unqualified); the tool layer adds and strips the `provider:` prefix. Every method throws only
// ProviderError (host/errors.ts): the provider maps its failures once, at this boundary.
// File paths are sandbox paths; a relative path resolves against the sandbox user's home
// directory ($HOME, /home/user on both providers). exec runs with the sandbox's environment
// (its create envs plus per-call envs) and HOME set, so `$HOME/...` works in commands.

/** Exactly the nine metadata fields the tools may disclose. Times are ISO 8601 or null. */
export interface SandboxMetadata {
  sandbox_id: string;
  template: string | null;
  status: string | null;
  region: string | null;
  started_at: string | null;
  end_at: string | null;
  cpu_count: number | null;
  memory_mb: number | null;
  disk_size_mb: number | null;
}

/** Options for create; omitted options keep the provider's defaults. */
export interface CreateOpts {
  template?: string;
  timeoutS?: number;
  envs?: Record<string, string>;
  region?: string;
  cpu?: number;
  memoryMb?: number;
}

export interface ListOpts {
  status?: string;
  region?: string;
  limit: number;
  offset: number;
}

/** A shell command run synchronously inside a sandbox (by bash -c, or sh where bash is missing). */
export interface ExecOpts {
  cwd?: string;
  envs?: Record<string, string>;
  stdin?: Buffer;
  /** Kills the command's whole process group when it elapses. */
  timeoutS: number;
  /**
   * Per-stream capture cap (default 1 MiB). Beyond it the stream is still drained; the result
   * keeps its first half and its last half (see OutputCapture) and sets *Truncated.
   */
  maxOutputBytes?: number;
  /**
   * Aborted when the caller gave up (e.g. the MCP client cancelled the call): the provider kills
   * the command's process group as at a timeout and returns promptly.
   */
  signal?: AbortSignal;
}

export interface ExecResult {
  /** Shell convention: 128+signal when killed by a signal; null if the outcome is unknown. */
  exitCode: number | null;
  stdout: Buffer;
  stderr: Buffer;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  timedOut: boolean;
}

export interface ReadFileOpts {
  offset?: number;
  length?: number;
}

export interface ReadFileResult {
  data: Buffer;
  /** The whole file's size in bytes. */
  size: number;
}

export interface WriteFileOpts {
  append?: boolean;
}

export interface FileEntry {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modified_at: string | null;
}

export interface ListFilesOpts {
  depth: number;
  /** Stop after this many entries (the caller sets truncated when reached). */
  maxEntries: number;
}

/** A sandbox provider: lifecycle, exec and files. Never extends a lifetime unless setTimeout is called. */
export interface Provider {
  /** The prefix of qualified ids, e.g. `local`. */
  readonly id: string;
  create(opts: CreateOpts): Promise<SandboxMetadata>;
  list(opts: ListOpts): Promise<SandboxMetadata[]>;
  getInfo(sandboxId: string): Promise<SandboxMetadata>;
  /** Sets the lifetime to `timeoutS` from now. */
  setTimeout(sandboxId: string, timeoutS: number): Promise<void>;
  /** Destroys the sandbox; throws not_found when it does not exist. */
  kill(sandboxId: string): Promise<void>;
  exec(sandboxId: string, command: string, opts: ExecOpts): Promise<ExecResult>;
  readFile(sandboxId: string, path: string, opts?: ReadFileOpts): Promise<ReadFileResult>;
  /** Creates parent directories; returns the file's size after the write. */
  writeFile(sandboxId: string, path: string, data: Buffer, opts?: WriteFileOpts): Promise<{ size: number }>;
  listFiles(sandboxId: string, path: string, opts: ListFilesOpts): Promise<FileEntry[]>;
  /** Releases clients and timers held by this instance (not the sandboxes). */
  close(): Promise<void>;
}
