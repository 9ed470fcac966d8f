// Entering a live sandbox to run one argv (setpriv + nsenter, or a template's entry helper, into
// its cgroups and namespaces, within its limits), with the process groups of running commands tracked per sandbox so that
// kill can end them.
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { RUN_AS_ENV, TASK_ENV_PREFIX } from '../../../../shared/protocol.js';
import { ProviderError } from '../../provider-error.js';
import { definedFields } from '../../../util/defined-fields.js';
import { cancelledBeforeStart, SANDBOX_HOME, type ExecRole } from '../../provider.js';
import { hostResourcesError, LOCAL_DETAILS, userProcessLimitIfShort } from '../errors.js';
import { buildEnterCommand, type Command, type TemplateEntry } from '../launch/command-lines.js';
import { proxyEnvironment, sandboxPathFor } from '../launch/environment.js';
import { templateEntryOf } from '../launch/template-entry.js';
import { preludeFor, REFUSED_EXIT, REFUSED_MESSAGE } from '../limits/entry-prelude.js';
import { processLimitReached } from '../limits/notes.js';
import { isStillAlive, sandboxGone, type LiveSandbox } from '../sandbox/registry.js';
import { specNetwork, type SandboxSpec, type SpecUser } from '../sandbox/spec.js';
import type { LocalSettings } from '../settings.js';
import { isOutOfProcesses } from '../system/user-processes.js';
import { CancelledError, captureCommand, killProcessGroup, SpawnFailedError, type CaptureResult } from './capture.js';

/** What an entry that could not start its command could not do (userProcessLimitIfShort's `failed`). */
const NOTHING_RAN = 'the command could not be started (nothing ran)';

/**
 * nsenter's own failure to fork the entry's first process, for want of processes or memory
 * (util-linux: `err(EXIT_FAILURE, "fork failed")`), as the entry's whole output.
 */
function isNsenterForkFailure(r: CaptureResult): boolean {
  return (
    r.exitCode === 1 &&
    r.stdout.length === 0 &&
    /^nsenter: fork failed: (Resource temporarily unavailable|Cannot allocate memory)\n?$/.test(r.stderr.toString('utf8'))
  );
}

/** How one command runs inside a sandbox (see CaptureOpts). */
export interface SandboxRunOpts {
  /** Whose processes these are: decides the entry's process limit and OOM score (limits/), and whose ids they run as (commandUser). */
  role: ExecRole;
  /** A file tool's script (role `service`'s limits), run as the image's user like a command (commandUser). */
  asFiles?: boolean;
  env: Record<string, string>;
  envScript?: string;
  timeoutMs: number;
  maxOutputBytes: number;
  withMetaFd: boolean;
  keepTail?: boolean;
  stdin?: Buffer;
  signal?: AbortSignal;
}

/** Opens a cgroup.procs file for the entry to join through (the server's right to, not the sandbox user's). */
function openProcsFile(sb: LiveSandbox, file: string): number {
  try {
    return openSync(file, 'w');
  } catch (e) {
    // A sandbox's cgroups go only when it ends: its keeper (or a kill's cleanup) removes them once
    // bwrap has exited, which can be a moment before the SIGKILLed pid 1 is seen gone (pid 1 is
    // outside them). A cgroup that is missing is therefore a sandbox ending, whatever pid 1 shows.
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' || !isStillAlive(sb)) throw sandboxGone();
    throw e;
  }
}

/** Runs commands inside sandboxes and remembers which of them still run. */
export class CommandRunner {
  /** Process groups of this instance's running commands, per sandbox (ended by kill). */
  private readonly running = new Map<string, Set<number>>();

  constructor(private readonly settings: Pick<LocalSettings, 'nodeBinDirs' | 'drainGraceMs' | 'cover' | 'keeperScript'>) {}

  /** PATH inside `spec`'s sandbox (launch/environment.ts). */
  pathOf(spec: SandboxSpec): string {
    return sandboxPathFor({ isTemplate: spec.root !== undefined, hasRuntime: spec.runtimeDir !== undefined }, this.settings.nodeBinDirs);
  }

  /**
   * The login environment of `spec`'s sandbox user (before the sandbox's and the call's own
   * variables): `user` in a base sandbox, root in a template's (whose files are root's).
   */
  baseEnv(spec: SandboxSpec): Record<string, string> {
    const user = spec.root ? 'root' : 'user';
    return { HOME: SANDBOX_HOME, PATH: this.pathOf(spec), LANG: 'C.UTF-8', USER: user, LOGNAME: user, SHELL: spec.shell };
  }

  /**
   * How commands enter `spec`'s sandbox when it runs on a template (helpers/enter.pl); undefined
   * for a base sandbox. `user`: the image's user (commandUser) they run as; absent: root inside.
   */
  templateEntry(spec: SandboxSpec, user?: SpecUser): TemplateEntry | undefined {
    const entry = templateEntryOf(spec, this.settings.keeperScript);
    return entry && user ? { ...entry, runAs: { uid: user.uid, gid: user.gid } } : entry;
  }

  /**
   * The image's user (sandbox/spec.ts SpecUser) whose ids a process of `role` in `spec`'s sandbox
   * is entered as: a person's or an agent's commands and shells (`command`), and the file tools
   * (`files`). The agent (`task`: a per-call agent's start, whose supervisor starts the command as
   * the user, see commandEnv; `service`: its other calls and install) stays root inside, which owns
   * its files and task directories. Undefined: root inside (or a base sandbox's own user).
   */
  commandUser(spec: SandboxSpec, role: ExecRole | 'files'): SpecUser | undefined {
    return role === 'command' || role === 'files' ? spec.user : undefined;
  }

  /**
   * The environment of a person's or an agent's command in `sb`: the login environment, the
   * sandbox's proxy variables (with an allow-list) and its own variables, then the call's. The one
   * place it is built, so run_command and the operator's shell cannot drift apart. With an image's
   * user, a `command` gets its HOME, USER and LOGNAME; a `task` start (a per-call agent, root
   * inside, whose own HOME holds it) gets them as task variables for its command alone, and
   * RUN_AS_ENV, the ids its supervisor starts the command as. A command or start through the
   * resident takes the `command` environment (its ids travel as the request's `run_as`).
   */
  commandEnv(sb: LiveSandbox, callEnvs: Readonly<Record<string, string>> = {}, role: ExecRole = 'command'): Record<string, string> {
    const base = this.baseEnv(sb.spec);
    const user = role === 'service' ? undefined : sb.spec.user;
    // A user passwd does not list has no name: USER and LOGNAME are empty, never root's.
    const login: Record<string, string> = user ? { HOME: user.home, USER: user.name ?? '', LOGNAME: user.name ?? '' } : {};
    if (user && role === 'command') Object.assign(base, login);
    const env: Record<string, string> = { ...base, ...proxyEnvironment(sb.spec.allowOut), ...sb.spec.envs };
    // Only the server sets it: a sandbox's variables never choose whom a task runs as.
    delete env[RUN_AS_ENV];
    if (!user || role === 'command') return { ...env, ...callEnvs };
    // A task: its command's login variables (a HOME of the sandbox's own variables stays), as task variables.
    const forTask: Record<string, string> = {};
    for (const name of ['HOME', 'USER', 'LOGNAME']) {
      if (name !== 'HOME' || sb.spec.envs.HOME === undefined) forTask[TASK_ENV_PREFIX + name] = login[name]!;
    }
    return { ...env, ...forTask, ...callEnvs, [RUN_AS_ENV]: `${user.uid}:${user.gid}` };
  }

  /**
   * Where a command of the image's `user` runs when the call names no directory: the image's
   * WorkingDir, else the user's home if the image has it, else `/` (never root's home, 0700).
   */
  static userStartDir(spec: Pick<SandboxSpec, 'workingDir'>, user: SpecUser): string {
    return spec.workingDir ?? (user.homeIsDir ? user.home : '/');
  }

  /** Ends the process groups of every command this instance still runs in `sandboxId`. */
  killCommands(sandboxId: string): void {
    for (const pgid of this.running.get(sandboxId) ?? []) killProcessGroup(pgid);
  }

  /**
   * Runs the argv that `buildArgv` makes in the sandbox and captures it. `buildArgv` gets the
   * entry prelude (limits/entry-prelude.ts), which the argv's first shell must run before anything
   * else. A cancelled call, a failed spawn or an entry the sandbox has no room for becomes a
   * ProviderError (conflict/cancelled, unavailable/nsenter_missing, insufficient_resources).
   */
  async run(sb: LiveSandbox, buildArgv: (prelude: string) => string[], opts: SandboxRunOpts): Promise<CaptureResult> {
    const procsFiles = sb.keeper.cgroups.map((d) => join(d, 'cgroup.procs'));
    const user = this.commandUser(sb.spec, opts.asFiles ? 'files' : opts.role);
    const joinsInside = sb.keeper.cgroupJoin === 'descriptor';
    const argv = buildArgv(preludeFor(sb.spec.limits, opts.role, joinsInside ? procsFiles.length : 0));
    const cmd: Command = buildEnterCommand(
      sb.keeper.pid1.pid,
      argv,
      sb.spec.identity,
      sb.spec.tools,
      joinsInside ? [] : procsFiles,
      specNetwork(sb.spec),
      this.templateEntry(sb.spec, user),
    );
    let groups = this.running.get(sb.id);
    if (!groups) this.running.set(sb.id, (groups = new Set()));
    let pgid: number | undefined;
    const passFds: number[] = [];
    try {
      if (joinsInside) for (const file of procsFiles) passFds.push(openProcsFile(sb, file));
      const r = await captureCommand(cmd, {
        ...opts,
        passFds,
        drainGraceMs: this.settings.drainGraceMs,
        onSpawn: (p) => groups.add((pgid = p)),
        onExit: () => {
          if (pgid !== undefined) groups.delete(pgid);
        },
        ...definedFields({ cover: this.settings.cover }),
      });
      if (sb.spec.limits && r.exitCode === REFUSED_EXIT && r.stderr.toString('utf8').trim() === REFUSED_MESSAGE) {
        throw processLimitReached(sb.spec.limits.processes, opts.role);
      }
      // nsenter could not fork the entry's first process: nothing ran. Named only when the host's
      // own count shows the server's user near its limit (a command printing the same line with
      // nothing else, then, is read as the limit it is at); otherwise the output stays as it is.
      if (isNsenterForkFailure(r)) {
        const named = userProcessLimitIfShort(NOTHING_RAN);
        if (named) throw named;
      }
      return r;
    } catch (e) {
      if (e instanceof CancelledError) throw cancelledBeforeStart();
      if (e instanceof SpawnFailedError) {
        if (e.code === 'ENOENT') {
          if (sb.spec.root) throw new ProviderError('unavailable', { code: 'perl_missing', detail: LOCAL_DETAILS.perlMissing });
          throw new ProviderError('unavailable', { code: 'nsenter_missing', detail: LOCAL_DETAILS.nsenterMissing });
        }
        throw (isOutOfProcesses(e.code) ? userProcessLimitIfShort(NOTHING_RAN) : null) ?? hostResourcesError(e.code);
      }
      throw e;
    } finally {
      for (const fd of passFds) closeSync(fd);
      if (pgid !== undefined) groups.delete(pgid);
      if (groups.size === 0) this.running.delete(sb.id);
    }
  }
}
