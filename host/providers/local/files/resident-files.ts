// read_file, write_file and list_files through the sandbox's resident agent (agent/ops/files.ts):
// the file scripts' work (scripts.ts) done by a process already in the sandbox, as its user, with
// no process started. Data travels in frames as base64, at most RESIDENT_DATA_BYTES a call: a
// larger write is the script's, a larger read the script's from there on. Outcomes map to the very
// errors the scripts' exit statuses do (fileStatusError). Where the resident cannot do it, the
// answer is 'fallback' and the caller runs the script: the resident never got the request (its
// outcome is nothing), or lost it where doing it again is harmless (a read, a listing, a write
// that replaces), or the listing is too large for a frame. An append the resident lost is
// agent_lost: it may have happened.
import {
  ListFilesResultSchema,
  PROTOCOL_VERSION,
  ReadFileResultSchema,
  WriteFileResultSchema,
  type AgentRequestInput,
  type AgentResponse,
  type FileFailure,
} from '../../../../shared/protocol.js';
import { ProviderError } from '../../provider-error.js';
import type { FileEntry } from '../../provider.js';
import { channelFailure, ResidentLost, ResidentUnreachable, type ResidentChannel } from '../../resident-channel.js';
import { isStillAlive, sandboxGone, type LiveSandbox } from '../sandbox/registry.js';
import { FILE_STATUS, fileStatusError, parseListing } from './scripts.js';

/** The caller runs the file script instead (see the module comment). */
export const FALLBACK = 'fallback';

/**
 * The most file data one call moves through the resident; beyond, the script moves it (a read: the
 * rest of it). Through frames each MiB costs some 12 ms of CPU more than through a script's pipe
 * (base64, JSON and the relay on the way; docs/performance.md), which costs 8-10 ms a call.
 */
export const RESIDENT_DATA_BYTES = 256 * 1024;

/** The file scripts' exit status for each of the resident's outcomes. */
const STATUS_OF: Record<FileFailure, number> = {
  not_found: FILE_STATUS.notFound,
  is_directory: FILE_STATUS.isDirectory,
  not_regular: FILE_STATUS.notRegular,
  permission: FILE_STATUS.permission,
  not_directory: FILE_STATUS.notDirectory,
  no_space: FILE_STATUS.noSpace,
};

/** One resident's file operations for one sandbox, all within `deadlineMs` (Date.now() scale). */
export class ResidentFiles {
  constructor(
    private readonly sb: LiveSandbox,
    private readonly channel: ResidentChannel,
    private readonly deadlineMs: number,
  ) {}

  /**
   * At most `limit` bytes from `offset`, with the size the file had when opened: the resident reads
   * the first RESIDENT_DATA_BYTES; `rest` is set when the caller is to read on from there (the file
   * has more, and more is wanted).
   */
  async read(
    path: string,
    offset: number,
    limit: number,
  ): Promise<{ data: Buffer; size: number; rest?: { offset: number; length: number } } | typeof FALLBACK> {
    const want = Math.min(RESIDENT_DATA_BYTES, limit);
    const answer = await this.ask({ protocol: PROTOCOL_VERSION, op: 'read_file', path, offset, length: want });
    if (answer === 'unreachable' || answer === 'lost') return FALLBACK;
    const r = this.parse(ReadFileResultSchema, answer);
    if (r === FALLBACK) return FALLBACK;
    if (r.status !== 'ok') throw this.failure(r.status);
    const data = Buffer.from(r.data_b64, 'base64');
    if (data.length > want) throw outsideProtocol();
    // Fewer bytes than asked: the end of the file.
    if (data.length < want || want === limit) return { data, size: r.size };
    return { data, size: r.size, rest: { offset: offset + want, length: limit - want } };
  }

  /**
   * Writes (or appends) `data`, at most RESIDENT_DATA_BYTES; the file's size after, or FALLBACK
   * for the script to write it all (never sent, or a replacing write lost: doing it again is harmless).
   */
  async write(path: string, data: Buffer, append: boolean): Promise<{ size: number } | typeof FALLBACK> {
    if (data.length > RESIDENT_DATA_BYTES) return FALLBACK;
    const answer = await this.ask({ protocol: PROTOCOL_VERSION, op: 'write_file', path, append, data_b64: data.toString('base64') });
    if (answer === 'lost' && append) throw channelFailure(new ResidentLost('lost'));
    if (answer === 'unreachable' || answer === 'lost') return FALLBACK;
    const r = this.parse(WriteFileResultSchema, answer);
    if (r === FALLBACK) return FALLBACK;
    if (r.status !== 'ok') throw this.failure(r.status);
    return { size: r.size };
  }

  /** At most `maxEntries` entries, `depth` levels deep, as parseListing has them. */
  async list(path: string, depth: number, maxEntries: number): Promise<FileEntry[] | typeof FALLBACK> {
    const answer = await this.ask({ protocol: PROTOCOL_VERSION, op: 'list_files', path, depth, max_entries: maxEntries });
    if (answer === 'unreachable' || answer === 'lost') return FALLBACK;
    const r = this.parse(ListFilesResultSchema, answer);
    if (r === FALLBACK || r.status === 'too_large') return FALLBACK;
    if (r.status !== 'ok') throw this.failure(r.status);
    return parseListing(Buffer.from(r.listing_b64, 'base64')).slice(0, maxEntries);
  }

  /** One request within the deadline: its answer, 'unreachable' (never sent) or 'lost' (sent, no answer). */
  private async ask(request: AgentRequestInput): Promise<AgentResponse | 'unreachable' | 'lost'> {
    const timeoutMs = this.deadlineMs - Date.now();
    if (timeoutMs <= 0) throw new ProviderError('timeout');
    try {
      return await this.channel.request(request, { timeoutMs });
    } catch (e) {
      if (e instanceof ResidentUnreachable) return 'unreachable';
      if (!isStillAlive(this.sb)) throw sandboxGone();
      // As a script that ran out of time.
      if (e instanceof ResidentLost && e.reason === 'timeout') throw new ProviderError('timeout');
      return 'lost';
    }
  }

  /** The answer's result, checked; FALLBACK for a request the resident refused as invalid (e.g. a path past its bound). */
  private parse<T>(
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } },
    answer: AgentResponse,
  ): T | typeof FALLBACK {
    if (!answer.ok) {
      if (answer.error.code === 'invalid_request') return FALLBACK;
      throw new ProviderError('internal');
    }
    const parsed = schema.safeParse(answer.result);
    if (!parsed.success) throw outsideProtocol();
    return parsed.data;
  }

  /** The outcome's error, as the script's exit status gives it (a sandbox that ended meanwhile is gone). */
  private failure(status: FileFailure): ProviderError {
    if (!isStillAlive(this.sb)) return sandboxGone();
    return fileStatusError(STATUS_OF[status]) ?? new ProviderError('internal');
  }
}

function outsideProtocol(): ProviderError {
  return new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent answered outside the protocol.' });
}
