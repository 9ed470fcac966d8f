// The host side of the agent protocol. A sandbox with a resident agent answers over its channel
// (provider.agentChannel: no process start per call); otherwise, and whenever the channel cannot
// take a request, one request per provider exec runs `node agent.cjs call`, pushing the agent
// first when the sandbox lacks this exact build. The agent file is content-addressed, so a new
// host never disturbs tasks supervised by an older agent. Answers are validated the same way
// whichever way they came.
import { randomBytes } from 'node:crypto';
import {
  RESULT_SCHEMAS,
  ResponseSchema,
  TASK_ENV_PREFIX,
  encodeRequest,
  type AgentErrorCode,
  type AgentRequestInput,
  type AgentResponse,
  type OpName,
} from '../../shared/protocol.js';
import { isProviderError, ProviderError, type ErrorCategory } from '../providers/provider-error.js';
import type { AgentChannel, Provider } from '../providers/provider.js';
import { RESIDENT_UNREACHABLE } from '../providers/resident-channel.js';
import { outOfProcessesError } from '../providers/resident-exec.js';
import { AGENT_INSTALL_DIR, type AgentBundle } from '../providers/agent-bundle.js';
import { definedFields } from '../util/defined-fields.js';
import { AGENT_INSTALL_WITH_NODE } from '../../shared/agent-runtime.js';

// A shell exit status no node or agent uses: "this agent build is not installed here".
const EXIT_AGENT_MISSING = 197;
const EXIT_NODE_MISSING = 127;

/** Agent error codes as provider-boundary categories. */
const AGENT_ERROR_CATEGORIES: Record<AgentErrorCode, ErrorCategory> = {
  protocol_mismatch: 'conflict',
  invalid_request: 'invalid_argument',
  task_limit: 'insufficient_resources',
  not_found: 'not_found',
  spawn_failed: 'internal',
  task_finished: 'conflict',
  no_stdin: 'conflict',
  stdin_closed: 'conflict',
  state_dir_full: 'insufficient_resources',
  task_not_finished: 'conflict',
  process_limit: 'insufficient_resources',
  cwd_not_found: 'invalid_argument',
  out_of_processes: 'insufficient_resources',
  internal: 'internal',
};

/** An `ok:false` answer from the agent, as a ProviderError keeping the agent's code. */
export function agentErrorToProviderError(code: AgentErrorCode, message: string): ProviderError {
  if (code === 'out_of_processes') return outOfProcessesError();
  // The agent's messages are ours (static text naming fields), so they may be shown.
  return new ProviderError(AGENT_ERROR_CATEGORIES[code], { code, detail: message });
}

export interface AgentCallOpts {
  /** Bound on the whole call, in seconds. */
  timeoutS: number;
  /**
   * A start's task variables: in the resident's request, or in the per-call agent's environment
   * behind TASK_ENV_PREFIX (never on a command line either way).
   */
  taskEnvs?: Record<string, string>;
  /** Aborting it stops the call as a timeout would (the call then fails). */
  signal?: AbortSignal;
  /** The per-call agent process's stdin (how `input` with data_on_stdin receives its data). Default: none. */
  stdin?: Buffer;
  /** The most bytes of its answer to capture (default: the exec's own cap); an answer cut there fails the call. */
  maxOutputBytes?: number;
  /** True: no resident agent is started to answer (see AgentChannelOpts); one already running still does. */
  isResidentStartSkipped?: boolean;
}

/**
 * Ops asked again as a per-call agent when the resident went away with the request in flight:
 * reads, and what is idempotent (a start names its task, so asking again reports it; a cancel of
 * a finished task reports the outcome). An input is not: its bytes may already be in the pipe.
 */
const RETRIED_WHEN_LOST: ReadonlySet<OpName> = new Set(['hello', 'get', 'list', 'cancel', 'remove', 'selftest', 'start']);

/** What the agent answers to an `op` request, validated. */
export type AgentResult<Op extends OpName> = ReturnType<(typeof RESULT_SCHEMAS)[Op]['parse']>;

/** Sends protocol requests to the agent inside a sandbox through a provider's exec. */
export class AgentClient {
  // One install per sandbox at a time (concurrent calls into a fresh sandbox share it), and a
  // count of completed installs so a call that raced one does not install again.
  private readonly pendingInstalls = new Map<string, Promise<void>>();
  private readonly installs = new Map<string, number>();

  constructor(private readonly bundle: AgentBundle) {}

  /**
   * The shell command that runs one request (`node`: the provider's Provider.agentNode); its length
   * is what the 96 KiB cap measures. With
   * `hasStdin`, a missing agent's exit first reads the stdin to its end: E2B's envd refuses stdin
   * for a process that has already exited, which would fail the call instead of installing.
   */
  commandFor(request: AgentRequestInput, hasStdin = false, node = 'node'): string {
    const file = `"$HOME/${AGENT_INSTALL_DIR}/${this.bundle.fileName}"`;
    const missing = hasStdin ? `{ cat >/dev/null; exit ${EXIT_AGENT_MISSING}; }` : `exit ${EXIT_AGENT_MISSING}`;
    return `[ -f ${file} ] || ${missing}; exec ${node} ${file} call ${encodeRequest(request)}`;
  }

  /** Sends one request (through the sandbox's resident when it can take it) and returns the schema-checked response. */
  async respond(provider: Provider, sandboxId: string, request: AgentRequestInput, opts: AgentCallOpts): Promise<AgentResponse> {
    // Not awaited when the provider has no residents at all: its calls go as they always did.
    const channel = provider.agentChannel
      ? await provider.agentChannel(sandboxId, definedFields({ isStartSkipped: opts.isResidentStartSkipped }))
      : null;
    if (channel?.supports(request.op)) {
      const answered = await this.throughResident(channel, request, opts);
      if (answered) return answered;
    }
    return (await this.callRaw(provider, sandboxId, request, opts)).response;
  }

  /** The resident's answer; null when the request should go to a per-call agent instead (see RETRIED_WHEN_LOST). */
  private async throughResident(channel: AgentChannel, request: AgentRequestInput, opts: AgentCallOpts): Promise<AgentResponse | null> {
    // The resident's stdin is its request stream: input data travels in the request (a frame is on no command line).
    const sent =
      request.op === 'input' && request.data_on_stdin
        ? {
            protocol: request.protocol,
            op: request.op,
            task_id: request.task_id,
            data: (opts.stdin ?? Buffer.alloc(0)).toString('utf8'),
            ...(request.eof !== undefined ? { eof: request.eof } : {}),
          }
        : request;
    try {
      return await channel.request(sent, {
        timeoutMs: opts.timeoutS * 1000,
        ...definedFields({ signal: opts.signal, callEnvs: opts.taskEnvs }),
      });
    } catch (e) {
      if (isProviderError(e) && e.code === RESIDENT_UNREACHABLE) return null;
      if (isProviderError(e) && e.code === 'agent_lost' && RETRIED_WHEN_LOST.has(request.op)) return null;
      throw e;
    }
  }

  /** Sends one request to a per-call agent and returns the raw, schema-checked response line. */
  async callRaw(
    provider: Provider,
    sandboxId: string,
    request: AgentRequestInput,
    opts: AgentCallOpts,
  ): Promise<{ line: string; response: AgentResponse }> {
    const key = `${provider.id}:${sandboxId}`;
    const installsBefore = this.installs.get(key) ?? 0;
    const command = this.commandFor(request, opts.stdin !== undefined, provider.agentNode);
    // A start's processes are the task's (its supervisor and command inherit them); the other ops are the server's own.
    const envs = opts.taskEnvs
      ? Object.fromEntries(Object.entries(opts.taskEnvs).map(([name, value]) => [TASK_ENV_PREFIX + name, value]))
      : undefined;
    const execOpts = {
      timeoutS: opts.timeoutS,
      role: request.op === 'start' ? ('task' as const) : ('service' as const),
      ...definedFields({
        envs,
        signal: opts.signal,
        stdin: opts.stdin,
        maxOutputBytes: opts.maxOutputBytes,
        isResidentStartSkipped: opts.isResidentStartSkipped,
      }),
    };
    let result = await provider.exec(sandboxId, command, execOpts);
    if (result.exitCode === EXIT_AGENT_MISSING) {
      // Unless a concurrent call installed it meanwhile, install it (once, shared), then ask again.
      if ((this.installs.get(key) ?? 0) === installsBefore) await this.install(provider, sandboxId, key, opts.isResidentStartSkipped);
      result = await provider.exec(sandboxId, command, execOpts);
    }
    if (result.timedOut) throw new ProviderError('timeout', { code: 'agent_timeout' });
    if (result.exitCode === EXIT_NODE_MISSING) {
      throw new ProviderError('unsupported', {
        code: 'node_missing',
        detail: 'Node.js (node) is not available in this sandbox; the task agent needs it. Use a template with Node.js 20 or later.',
      });
    }
    const line = result.stdout.toString('utf8').trim().split('\n').pop() ?? '';
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      throw new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent did not answer with a protocol line.' });
    }
    const response = ResponseSchema.safeParse(parsed);
    if (!response.success || result.exitCode !== 0) {
      throw new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent answered outside the protocol.' });
    }
    return { line, response: response.data };
  }

  /** Uploads the agent under a temporary name and moves it into place; concurrent callers share one install. */
  private install(provider: Provider, sandboxId: string, key: string, isResidentStartSkipped = false): Promise<void> {
    let pending = this.pendingInstalls.get(key);
    if (!pending) {
      pending = (async () => {
        if (!(await this.installWithTools(provider, sandboxId, isResidentStartSkipped))) {
          await this.installWithNode(provider, sandboxId, isResidentStartSkipped);
        }
        this.installs.set(key, (this.installs.get(key) ?? 0) + 1);
      })();
      this.pendingInstalls.set(key, pending);
      const settled = () => this.pendingInstalls.delete(key);
      pending.then(settled, settled);
    }
    return pending;
  }

  /**
   * The usual install: the file tools write a temporary file, mv renames it into place (atomic:
   * another server never runs a half-written agent). False when the root lacks a program for it.
   */
  private async installWithTools(provider: Provider, sandboxId: string, isResidentStartSkipped: boolean): Promise<boolean> {
    const file = `"$HOME/${AGENT_INSTALL_DIR}/${this.bundle.fileName}"`;
    const tmp = `${AGENT_INSTALL_DIR}/.${this.bundle.fileName}.${randomBytes(6).toString('hex')}`;
    try {
      await provider.writeFile(sandboxId, tmp, this.bundle.bytes, { isServerWrite: true });
    } catch (e) {
      if (isProviderError(e) && e.code === 'tool_missing') return false;
      throw e;
    }
    const moved = await provider.exec(
      sandboxId,
      `command -v mv >/dev/null 2>&1 && command -v rm >/dev/null 2>&1 || exit 127; [ -f ${file} ] || mv -f "$HOME/${tmp}" ${file}; rm -f "$HOME/${tmp}"`,
      { timeoutS: 60, role: 'service', isResidentStartSkipped },
    );
    return moved.exitCode !== 127;
  }

  /**
   * A root without those programs (only a shell): the agent's own node (the provider's agentNode,
   * the runtime a local sandbox has bound in) writes the bundle from stdin and renames it into place.
   */
  private async installWithNode(provider: Provider, sandboxId: string, isResidentStartSkipped: boolean): Promise<void> {
    const file = `"$HOME/${AGENT_INSTALL_DIR}/${this.bundle.fileName}"`;
    const r = await provider.exec(sandboxId, `exec ${provider.agentNode} -e '${AGENT_INSTALL_WITH_NODE}' ${file}`, {
      timeoutS: 60,
      role: 'service',
      stdin: this.bundle.bytes,
      isResidentStartSkipped,
    });
    if (r.exitCode !== 0) {
      throw new ProviderError('unsupported', {
        code: 'tool_missing',
        detail:
          "The task agent cannot be installed: this sandbox's root has neither the programs it is installed with (stat, cat, mv: coreutils) nor node. Use a template that has them.",
      });
    }
  }

  /** Sends one request and returns its validated result, or throws the agent's error as a ProviderError. */
  async call<Op extends OpName>(
    provider: Provider,
    sandboxId: string,
    request: AgentRequestInput & { op: Op },
    opts: AgentCallOpts,
  ): Promise<AgentResult<Op>> {
    const response = await this.respond(provider, sandboxId, request, opts);
    if (!response.ok) throw agentErrorToProviderError(response.error.code, response.error.message);
    const schema = RESULT_SCHEMAS[request.op];
    const result = schema.safeParse(response.result);
    if (!result.success)
      throw new ProviderError('internal', { code: 'agent_failed', detail: 'The in-sandbox agent answered outside the protocol.' });
    return result.data as AgentResult<Op>;
  }
}
