// The e2b provider: E2B's cloud behind the Provider interface, on the `e2b` SDK, composed the way
// the SDK composes Sandbox: lifecycle (static control-plane calls, no connect), connections (envd
// reached without lengthening a lifetime), commands, files and terminals (on a connected
// sandbox), and each sandbox's resident agent (resident.ts: agent calls and commands as messages
// to one long-lived command, with the per-call ways as the fallback). This file only wires them
// together and is the one place their failures become ProviderErrors (errors.ts's table). Only
// setTimeout changes a lifetime.
import { Sandbox } from 'e2b';
import { ProviderError } from '../provider-error.js';
import {
  assertExposablePort,
  DEFAULT_EXEC_OUTPUT_CAP_BYTES,
  resolveSandboxPath,
  SANDBOX_HOME,
  type ExecOpts,
  type PromotableExecOpts,
  type PromotableOutcome,
  type Provider,
  withFileRemoval,
} from '../provider.js';
import { agentRemovesFile } from '../../../shared/protocol.js';
import { asAgentChannel } from '../resident-channel.js';
import { outOfProcessesError, requestExec } from '../resident-exec.js';
import { definedFields } from '../../util/defined-fields.js';
import { E2bResidents } from './resident.js';
import { createCommands, checkExecCanStart, DEFAULT_KILL_GRACE_S, runHelperScript, type CommandsOpts } from './commands.js';
import { createConnections, type ConnectionsOpts } from './connections.js';
import { mapE2bError, mapped } from './errors.js';
import * as files from './files.js';
import { createLifecycle } from './lifecycle.js';
import { describeNetwork, exposedPort, RESERVED_PORTS } from './network.js';
import { sdkOptsFrom, type E2bConnectionConfig } from './sdk-opts.js';
import { assertMayUseE2bTemplate, createSnapshot } from './snapshots.js';
import { openTerminal } from './terminal.js';
import { readUsage } from './usage.js';

/** Configuration from the server (never from tool arguments): where E2B is, the connection cache, command timing. */
export type E2bProviderOpts = E2bConnectionConfig &
  ConnectionsOpts &
  CommandsOpts & {
    /** false: no resident agent; agent calls and commands run as envd commands of their own (default true). */
    residentAgent?: boolean;
  };

function sandboxNotFound(): ProviderError {
  return new ProviderError('not_found', { status: 404, code: 'SandboxNotFoundError' });
}

/** A sandbox path under the home as relative to it (the resident resolves it against the command's HOME, as envd does). */
function homeRelative(path: string): string {
  return path === SANDBOX_HOME ? '.' : path.startsWith(SANDBOX_HOME + '/') ? path.slice(SANDBOX_HOME.length + 1) : path;
}

/** `env -0` output as a map (a value may hold newlines; NUL cannot occur in one). */
function parseEnv0(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of text.split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/** Creates the e2b provider; no network call happens until a method is used. */
export function createE2bProvider(opts: E2bProviderOpts = {}): Provider {
  const sdkOpts = sdkOptsFrom(opts);
  const lifecycle = createLifecycle(sdkOpts);
  const connections = createConnections(sdkOpts, opts);
  const commands = createCommands(opts);
  const residents = new E2bResidents();

  /**
   * exec through the sandbox's resident, over envd's environment with the call's variables on
   * top (as envd gives a command); 'unreachable' when there is none that takes it (nothing ran).
   */
  async function execThroughResident(
    sandbox: Sandbox,
    command: string,
    o: ExecOpts,
    promote?: PromotableExecOpts['promote'],
  ): Promise<PromotableOutcome | 'unreachable'> {
    if (opts.residentAgent === false) return 'unreachable';
    const channel = await residents.channel(sandbox, o.isResidentStartSkipped);
    if (!channel?.supports('exec') || (promote && !channel.hello.promotable)) return 'unreachable';
    // run_code's program: a resident of minor 10 removes it once the command ends; an older one runs the command that removes it itself.
    const run = withFileRemoval(command, o, agentRemovesFile(channel.hello));
    const answer = await requestExec(channel, {
      command: run.command,
      cwd: o.cwd !== undefined ? homeRelative(resolveSandboxPath(o.cwd)) : undefined,
      env: o.envs ?? {},
      inheritEnv: true,
      timeoutS: o.timeoutS,
      maxOutputBytes: o.maxOutputBytes ?? DEFAULT_EXEC_OUTPUT_CAP_BYTES,
      stdin: o.stdin,
      signal: o.signal,
      // As the per-call wrapper does: TERM first (traps run), KILL after the grace period, and
      // what the command left in its group is stopped the same way when it finishes.
      killGraceMs: (opts.killGraceS ?? DEFAULT_KILL_GRACE_S) * 1000,
      reapsGroup: true,
      ...definedFields({ promote, removeFile: run.removeFile }),
    });
    if (answer === 'unreachable' || answer.kind !== 'refused') return answer;
    // The call's argument is wrong (as envd says of a missing cwd), or the agent failed.
    if (answer.code === 'cwd_not_found') {
      throw new ProviderError('invalid_argument', {
        code: 'cwd_not_found',
        detail: 'The working directory does not exist in the sandbox.',
      });
    }
    if (answer.code === 'out_of_processes') throw outOfProcessesError();
    throw new ProviderError(answer.code === 'invalid_request' ? 'invalid_argument' : 'internal', { code: answer.code });
  }

  /** True only when the control plane says the sandbox does not exist (any other answer: false). */
  async function isGone(sandboxId: string): Promise<boolean> {
    try {
      await lifecycle.getInfo(sandboxId);
      return false;
    } catch (e) {
      return mapE2bError(e).category === 'not_found';
    }
  }

  // Runs an envd operation on the sandbox's connection; a sandbox that is gone drops it. envd
  // reports a sandbox that was killed or expired meanwhile as a timeout (E2B's proxy answers 502),
  // so a timeout or unavailable answer is checked against the control plane before it is reported.
  async function onEnvd<T>(sandboxId: string, fn: (sandbox: Sandbox) => Promise<T>): Promise<T> {
    try {
      return await fn(await connections.get(sandboxId));
    } catch (e) {
      const err = mapE2bError(e);
      if (err.category === 'not_found' && err.code === 'SandboxNotFoundError') connections.forget(sandboxId);
      if (err.category === 'timeout' || err.category === 'unavailable') {
        connections.forget(sandboxId);
        if (await isGone(sandboxId)) throw sandboxNotFound();
      }
      throw err;
    }
  }

  return {
    id: 'e2b',

    async create(o) {
      // Another user's snapshot reads as a missing template, before anything is created.
      const template = o.template;
      if (template !== undefined) await mapped(() => assertMayUseE2bTemplate(template, o.templateUser, sdkOpts()));
      const { sandbox, metadata } = await mapped(() => lifecycle.create(o));
      connections.remember(sandbox);
      return metadata;
    },

    list: (o) => mapped(() => lifecycle.list(o)),

    getInfo: (sandboxId) => mapped(() => lifecycle.getInfo(sandboxId)),

    setTimeout: (sandboxId, timeoutS) => mapped(() => lifecycle.setTimeout(sandboxId, timeoutS)),

    async kill(sandboxId) {
      const killed = await mapped(() => lifecycle.kill(sandboxId));
      connections.forget(sandboxId);
      residents.forget(sandboxId);
      if (!killed) throw sandboxNotFound();
    },

    getOwner: (sandboxId) => mapped(() => lifecycle.getOwner(sandboxId)),

    getWorkspace: (sandboxId) => mapped(() => lifecycle.getWorkspace(sandboxId)),

    // What envd gives every command: the create envs and the template's (the SDK has no call
    // that returns the create envs themselves).
    getEnvironment: (sandboxId) => onEnvd(sandboxId, async (sandbox) => parseEnv0(await runHelperScript(sandbox, 'env -0', {}))),

    async exec(sandboxId, command, o) {
      // Refused before connecting: nothing is contacted for a command that cannot run.
      checkExecCanStart(command, o.signal);
      return onEnvd(sandboxId, async (sandbox) => {
        const outcome = await execThroughResident(sandbox, command, o);
        // envd's own command: it removes run_code's program itself.
        if (outcome === 'unreachable') return commands.exec(sandbox, withFileRemoval(command, o, false).command, o);
        if (outcome.kind !== 'finished') throw new ProviderError('internal');
        return outcome.result;
      });
    },

    async execPromotable(sandboxId, command, o) {
      checkExecCanStart(command, o.signal);
      return onEnvd(sandboxId, async (sandbox) => {
        const outcome = await execThroughResident(sandbox, command, o, o.promote);
        return outcome === 'unreachable' ? null : outcome;
      });
    },

    async agentChannel(sandboxId, o = {}) {
      if (opts.residentAgent === false) return null;
      return onEnvd(sandboxId, async (sandbox) => {
        const channel = await residents.channel(sandbox, o.isStartSkipped);
        // A start's command gets envd's environment with its task variables on top.
        return channel ? asAgentChannel(channel, (request, callEnvs) => ({ ...request, env: { ...callEnvs }, inherit_env: true })) : null;
      });
    },

    async readFile(sandboxId, p, o = {}) {
      const abs = resolveSandboxPath(p);
      return onEnvd(sandboxId, (sandbox) => files.readFile(sandbox, abs, o));
    },

    async writeFile(sandboxId, p, data, o = {}) {
      const abs = resolveSandboxPath(p);
      return onEnvd(sandboxId, (sandbox) => files.writeFile(sandbox, abs, data, o));
    },

    async listFiles(sandboxId, p, o) {
      const abs = resolveSandboxPath(p);
      return onEnvd(sandboxId, (sandbox) => files.listFiles(sandbox, abs, o));
    },

    async exposePort(sandboxId, port) {
      // Checked before connecting: nothing is contacted for a port that cannot exist.
      assertExposablePort(port, RESERVED_PORTS);
      return onEnvd(sandboxId, async (sandbox) => exposedPort(sandbox, port));
    },

    describeNetwork: (sandboxId) => mapped(async () => describeNetwork(await Sandbox.getInfo(sandboxId, sdkOpts()))),

    // A control-plane call (no connect): looking never lengthens a lifetime.
    usage: (sandboxId) => mapped(() => readUsage(sandboxId, sdkOpts())),

    async openTerminal(sandboxId, o) {
      return onEnvd(sandboxId, (sandbox) => openTerminal(sandbox, o));
    },

    // A control-plane call: no connection, no lifetime change.
    snapshot: (sandboxId, name, opts) => mapped(() => createSnapshot(sandboxId, name, sdkOpts(), opts?.owner)),

    async close() {
      residents.closeAll();
      connections.clear();
    },
  };
}
