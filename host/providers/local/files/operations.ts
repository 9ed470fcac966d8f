// readFile, writeFile and listFiles: through the sandbox's resident agent where it has one that
// serves them (resident-files.ts: no process started), else — a sandbox of an older server, a
// resident not answering — by one of the in-sandbox scripts of scripts.ts, run as the sandbox user,
// bounded in time and output, its exit status mapped. Both give the same results and errors.
import { ProviderError } from '../../provider-error.js';
import { definedFields } from '../../../util/defined-fields.js';
import {
  resolveSandboxPath,
  type FileEntry,
  type ListFilesOpts,
  type ReadFileOpts,
  type ReadFileResult,
  type WriteFileOpts,
} from '../../provider.js';
import type { CaptureResult } from '../exec/capture.js';
import type { CommandRunner } from '../exec/command-runner.js';
import type { ResidentLinks } from '../exec/resident-link.js';
import { isStillAlive, sandboxGone, type LiveSandbox, type SandboxRegistry } from '../sandbox/registry.js';
import type { SpecUser } from '../sandbox/spec.js';
import type { LocalSettings } from '../settings.js';
import { invalid, isNonNegativeInt } from '../validation.js';
import { FALLBACK, ResidentFiles } from './resident-files.js';
import { fileStatusError, LIST_SCRIPT, parseListing, READ_SCRIPT, WRITE_SCRIPT } from './scripts.js';

const READ_CAP_BYTES = 1024 * 1024 * 1024;
const LIST_OUTPUT_CAP_BYTES = 64 * 1024 * 1024;

/** The file operations of the local provider. */
export class SandboxFiles {
  constructor(
    private readonly settings: Pick<LocalSettings, 'fileOpTimeoutMs'>,
    private readonly registry: SandboxRegistry,
    private readonly runner: CommandRunner,
    private readonly residents: ResidentLinks | null = null,
  ) {}

  /** Bytes of a regular file from `offset` (to the end or `length`), with the file's size. */
  async readFile(sandboxId: string, path: string, opts: ReadFileOpts = {}): Promise<ReadFileResult> {
    const offset = opts.offset ?? 0;
    if (!isNonNegativeInt(offset)) throw invalid('offset must be an integer of at least 0.');
    if (opts.length !== undefined && !isNonNegativeInt(opts.length)) throw invalid('length must be an integer of at least 0.');
    const abs = resolveSandboxPath(path);
    const sb = await this.registry.require(sandboxId);
    const through = await this.residentFiles(sb, 'read_file');
    const viaResident = through && (await through.read(abs, offset, opts.length ?? READ_CAP_BYTES));
    if (viaResident && viaResident !== FALLBACK) {
      if (!viaResident.rest) return { data: viaResident.data, size: viaResident.size };
      // A large file: the script reads on from there (the size stays the one first seen).
      const more = await this.readByScript(sb, abs, viaResident.rest.offset, viaResident.rest.length);
      return { data: Buffer.concat([viaResident.data, more.data]), size: viaResident.size };
    }
    return this.readByScript(sb, abs, offset, opts.length);
  }

  /** READ_SCRIPT's bytes from `offset` (to the end, capped, or `length`) and the size it saw. */
  private async readByScript(sb: LiveSandbox, abs: string, offset: number, length: number | undefined): Promise<ReadFileResult> {
    const r = await this.runScript(sb, READ_SCRIPT, [abs, String(offset), length === undefined ? '' : String(length)], {
      maxOutputBytes: length ?? READ_CAP_BYTES,
    });
    const size = Number(r.meta.toString().trim());
    if (!Number.isSafeInteger(size)) throw new ProviderError('internal');
    return { data: r.stdout, size };
  }

  /** Writes (or appends) `data`, creating parent directories; resolves with the file's new size. */
  async writeFile(sandboxId: string, path: string, data: Buffer, opts: WriteFileOpts = {}): Promise<{ size: number }> {
    if (!Buffer.isBuffer(data)) throw invalid('data must be bytes.');
    const abs = resolveSandboxPath(path);
    const sb = await this.registry.require(sandboxId);
    const asServer = opts.isServerWrite === true;
    const through = await this.residentFiles(sb, 'write_file', asServer);
    const written = through && (await through.write(abs, data, opts.append === true));
    if (written && written !== FALLBACK) return written;
    const r = await this.runScript(sb, WRITE_SCRIPT, [abs, opts.append ? 'a' : 'w'], { stdin: data, maxOutputBytes: 0, asServer });
    const size = Number(r.meta.toString().trim());
    if (!Number.isSafeInteger(size)) throw new ProviderError('internal');
    return { size };
  }

  /** At most `opts.maxEntries` entries of a directory, `opts.depth` levels deep. */
  async listFiles(sandboxId: string, path: string, opts: ListFilesOpts): Promise<FileEntry[]> {
    if (!Number.isSafeInteger(opts.depth) || opts.depth < 1) throw invalid('depth must be an integer of at least 1.');
    if (!Number.isSafeInteger(opts.maxEntries) || opts.maxEntries < 1) throw invalid('maxEntries must be an integer of at least 1.');
    const abs = resolveSandboxPath(path);
    const sb = await this.registry.require(sandboxId);
    const through = await this.residentFiles(sb, 'list_files');
    const viaResident = through && (await through.list(abs, opts.depth, opts.maxEntries));
    if (viaResident && viaResident !== FALLBACK) return viaResident;
    const r = await this.runScript(sb, LIST_SCRIPT, [abs, String(opts.depth), String(opts.maxEntries)], {
      maxOutputBytes: LIST_OUTPUT_CAP_BYTES,
    });
    return parseListing(r.stdout).slice(0, opts.maxEntries);
  }

  /**
   * The sandbox's resident's file operations, when it has a resident serving `op`; null otherwise,
   * and where the tools act as an image's user (the resident is root inside): the scripts, entered as it.
   */
  private async residentFiles(
    sb: LiveSandbox,
    op: 'read_file' | 'write_file' | 'list_files',
    asServer = false,
  ): Promise<ResidentFiles | null> {
    if (sb.spec.user && !asServer) return null;
    const channel = await this.residents?.channel(sb);
    return channel?.supports(op) ? new ResidentFiles(sb, channel, Date.now() + this.settings.fileOpTimeoutMs) : null;
  }

  /** Runs one of the file scripts as the sandbox user and maps its status. */
  private async runScript(
    sb: LiveSandbox,
    script: string,
    args: string[],
    opts: { stdin?: Buffer; maxOutputBytes: number; asServer?: boolean },
  ): Promise<CaptureResult> {
    // The server's own helper: it may use the processes kept for the server (limits/process-tiers.ts).
    const r = await this.runner.run(sb, (prelude) => ['/bin/sh', '-c', prelude + script, 'sh', ...args], {
      role: 'service',
      // As the image's user, if the sandbox has one: what it writes is that user's (docs/templates.md).
      asFiles: opts.asServer !== true,
      env: { ...this.runner.baseEnv(sb.spec), LC_ALL: 'C.UTF-8' },
      timeoutMs: this.settings.fileOpTimeoutMs,
      maxOutputBytes: opts.maxOutputBytes,
      withMetaFd: true,
      ...definedFields({ stdin: opts.stdin }),
    });
    if (r.timedOut) throw new ProviderError('timeout');
    const err = fileStatusError(r.exitCode, r.meta);
    if (err) {
      if (!isStillAlive(sb)) throw sandboxGone();
      const user = opts.asServer === true ? undefined : sb.spec.user;
      if (user && err.category === 'permission_denied') throw imageUserDenied(user);
      throw err;
    }
    return r;
  }
}

/** A file tool refused as the image's user (docs/templates.md): says whose rights these are, and where relative paths go. */
function imageUserDenied(user: SpecUser): ProviderError {
  return new ProviderError('permission_denied', {
    code: 'EACCES',
    detail:
      `The image's user (uid ${user.uid}), whom the file tools act as here, may not access this path. ` +
      `Relative paths resolve against /home/user, which is root's: give an absolute path (its home ${user.home}, the workspace, /tmp).`,
  });
}
