// The sandbox's resident agent, kept by the keeper: started once the sandbox is ready, entered the
// way every command enters (nsenter into its namespaces, joining its cgroups, as its user, at the
// server's own tier of the process limit: it runs the server's agent calls), restarted when it
// exits (after a back-off), and relayed to servers through `agent.sock` (resident-relay.ts). Its
// environment is a fixed login environment plus the sandbox's SANDBOX_AGENT_* settings — never the
// sandbox's other variables (a NODE_OPTIONS there changes commands, not the resident); commands
// get theirs in each request. The agent file is the keeper's build (dist/agent.cjs beside
// keeper.cjs), written into the sandbox home under its content-addressed name unless there already.
// resident.json records the live resident (host pid and start time) for tools and tests.
//
// After its quiet period (spec.residentIdleExitS) the relay suspends and the keeper ends the
// resident's input: it exits, which is no failure (no back-off, not a restart), and nothing runs
// until a server connects or sends a frame, when it is started again at once. An idle sandbox so
// holds only its keeper (and its tasks' own supervisors).
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { lineSplitter } from '../../../../shared/frame-lines.js';
import { SANDBOX_HOME } from '../../provider.js';
import { buildEnterCommand } from '../launch/command-lines.js';
import { templateEntryOf } from '../launch/template-entry.js';
import { envPrelude, exportScript, nodeBinDirsOf, sandboxPath, sandboxPathFor, shellQuote } from '../launch/environment.js';
import { AGENT_COMPILE_CACHE_VAR, AGENT_INSTALL_WITH_NODE, agentRuntimeArgv } from '../../../../shared/agent-runtime.js';
import { preludeFor } from '../limits/entry-prelude.js';
import { specNetwork, type SandboxSpec } from '../sandbox/spec.js';
import { AGENT_SOCKET, RESIDENT_FILE, writePrivateFile } from '../sandbox/state-dir.js';
import { RESIDENT_IDLE_EXIT_DEFAULT_S } from '../../../../shared/limits.js';
import { identify, pidNamespace, type ProcIdentity } from '../system/proc.js';
import { isDebugOn } from '../../../util/log.js';
import type { HeldResource } from './held-resources.js';
import { lineFlags, SMALL_HEAP_FLAGS } from './node-flags.js';
import { ResidentRelay } from './resident-relay.js';

/** What the keeper knows when it starts the resident. */
export interface ResidentOpts {
  dir: string;
  spec: SandboxSpec;
  pid1: ProcIdentity;
  /** The sandbox's cgroup directories, and whether a command joins them from inside (by descriptor). */
  cgroups: readonly string[];
  joinsByDescriptor: boolean;
  /** This keeper's node and script (the agent is built beside it). */
  nodePath: string;
  keeperScript: string;
}

/** What resident.json holds. */
export interface ResidentRecord {
  version: 1;
  /** The live resident (host pid and start time); null while it is down. */
  resident: ProcIdentity | null;
  restarts: number;
  /** The last resident's exit status (128+signal when killed); null before any exit. */
  last_exit: number | null;
  /** Exits after a quiet period (not failures: never in `restarts`); absent in records of older keepers. */
  idle_exits?: number;
  /** When the resident last exited after its quiet period, if none runs since (ms since the epoch); else null. */
  idle_at_ms?: number | null;
}

/**
 * Node's flags for the resident: a small heap, one V8 worker thread (each thread counts against
 * the process limit), and the young-generation, memory-reducer and compiler flags of this keeper's
 * line (lineFlags): the resident runs on the keeper's node, or on the agent runtime, which is made
 * from that same node.
 */
const NODE_FLAGS = [...SMALL_HEAP_FLAGS, '--v8-pool-size=1', ...lineFlags(process.versions.v8)];
/** Back-off before the next start after each failure in a row, then its last value. */
const BACKOFF_MS = [0, 1000, 2000, 4000, 8000, 16000, 32000, 60000];
/** A resident that ran this long was fine: the back-off starts over. */
const HEALTHY_AFTER_MS = 60_000;
/** Descriptor on which the resident's shell reads the agent file when the sandbox has none. */
const BUNDLE_FD = 3;

/** The relay, listening, and the start of the resident behind it. */
export interface ResidentStart {
  /** Held until the sandbox ends: stops restarting and closes the relay. */
  held: HeldResource;
  /** Starts the resident (once the sandbox is ready: a node start must not lengthen create). */
  launch(): void;
}

/**
 * Makes the relay's socket (before the sandbox is reported ready, so that a server never finds a
 * sandbox of this keeper without it); the resident starts with launch(). Throws when the socket
 * cannot be made.
 */
export async function openResidentRelay(opts: ResidentOpts): Promise<ResidentStart> {
  // Bound by its short name in the sandbox directory, whatever the length of the state directory's path.
  process.chdir(opts.dir);
  const quietS = opts.spec.residentIdleExitS ?? RESIDENT_IDLE_EXIT_DEFAULT_S;
  let keeper: ResidentKeeper | null = null;
  const relay = new ResidentRelay(quietS > 0 ? quietS * 1000 : null, {
    onQuiet: () => keeper?.quiet(),
    onDemand: () => keeper?.wake(),
  });
  await relay.listen(AGENT_SOCKET);
  keeper = new ResidentKeeper(opts, relay);
  const started = keeper;
  return {
    held: { release: async () => started.stop(), releaseNow: () => started.stop() },
    launch: () => started.launch(),
  };
}

class ResidentKeeper {
  private child: ChildProcess | null = null;
  private isStopped = false;
  private failures = 0;
  private restarts = 0;
  private idleExits = 0;
  /** The resident's input was ended after its quiet period: its exit is not a failure. */
  private isQuieting = false;
  /** No resident after a quiet period: the next demand starts one. */
  private isIdle = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly opts: ResidentOpts,
    private readonly relay: ResidentRelay,
  ) {}

  launch(): void {
    if (this.isStopped) return;
    this.isIdle = false;
    const startedAtMs = Date.now();
    const child = this.spawnResident();
    this.child = child;
    if (!child) {
      this.scheduleRestart(startedAtMs);
      return;
    }
    const stdin = child.stdio[0] as Writable;
    const stdout = child.stdio[1] as Readable;
    stdin.on('error', () => {});
    let isGreeted = false;
    const end = (): void => {
      // Not a resident we can serve: its output stops counting, its input ends (it exits).
      stdout.destroy();
      stdin.destroy();
    };
    stdout.on(
      'data',
      lineSplitter((bytes) => {
        const line = bytes.toString('latin1');
        if (!isGreeted) {
          if (!line.startsWith('{"id":0,"hello":')) return end();
          isGreeted = true;
          this.relay.attach({ write: (frame) => void stdin.write(frame, 'latin1') }, line);
          this.record(child);
          return;
        }
        if (!this.relay.fromResident(line)) end();
      }, end),
    );
    stdout.on('error', () => {});
    child.on('exit', (code, signal) => {
      const status = code ?? (signal ? 128 : null);
      if (this.child === child && this.isQuieting) {
        // Asked to go (nothing was in flight, and the relay holds what came since): not a failure.
        this.isQuieting = false;
        this.child = null;
        this.idleExits++;
        this.write({ ...this.counts(), resident: null, last_exit: status, idle_at_ms: Date.now() });
        if (this.relay.hasDemand) this.launch();
        else this.isIdle = true;
        return;
      }
      this.relay.detach();
      this.recordDown(status);
      this.scheduleRestart(startedAtMs);
    });
  }

  /** The quiet period passed (the relay is suspended): the resident's input ends, and it exits. */
  quiet(): void {
    const child = this.child;
    if (!child || this.isStopped) return;
    this.isQuieting = true;
    (child.stdio[0] as Writable).end();
  }

  /** A server needs a resident: start one if none runs after a quiet period (a failed one keeps its back-off). */
  wake(): void {
    if (this.isIdle) this.launch();
  }

  stop(): void {
    this.isStopped = true;
    clearTimeout(this.timer);
    this.relay.close();
    // At the sandbox's end pid 1 is killed first; otherwise end of input makes the resident exit.
    (this.child?.stdio[0] as Writable | undefined)?.destroy();
  }

  private scheduleRestart(startedAtMs: number): void {
    if (this.isStopped) return;
    this.failures = Date.now() - startedAtMs >= HEALTHY_AFTER_MS ? 0 : this.failures + 1;
    const delay = BACKOFF_MS[Math.min(this.failures, BACKOFF_MS.length - 1)]!;
    this.restarts++;
    this.timer = setTimeout(() => this.launch(), delay);
    this.timer.unref();
  }

  /** Enters the sandbox with the resident's command; null when it could not be spawned at all. */
  private spawnResident(): ChildProcess | null {
    const { spec, dir, cgroups, joinsByDescriptor, nodePath, keeperScript } = this.opts;
    const agentDir = dirname(keeperScript);
    let bundle: Buffer;
    let fileName: string;
    try {
      bundle = readFileSync(join(agentDir, 'agent.cjs'));
      fileName = (JSON.parse(readFileSync(join(agentDir, 'agent-manifest.json'), 'utf8')) as { file_name: string }).file_name;
    } catch {
      return null;
    }
    const procsFiles = cgroups.map((d) => join(d, 'cgroup.procs'));
    const shell = spec.shell;
    const node = residentNode(spec, nodePath).map(shellQuote).join(' ');
    // Installed with the root's mkdir, cat and mv where it has them, else by node itself (a
    // template's root may hold nothing but a shell).
    const inner =
      `__f="$HOME/.sandbox-mcp/agent/${fileName}"; ` +
      `if [ ! -f "$__f" ]; then ` +
      `if command -v mkdir && command -v cat && command -v mv; then ` +
      `mkdir -p "\${__f%/*}" && cat <&${BUNDLE_FD} > "$__f.$$" && mv -f "$__f.$$" "$__f"; ` +
      `else ${node} -e '${AGENT_INSTALL_WITH_NODE}' "$__f" <&${BUNDLE_FD}; fi >/dev/null 2>&1 || exit 126; fi; ` +
      `exec ${BUNDLE_FD}<&-; exec ${node} "$__f" serve`;
    const argv = [
      shell,
      '-c',
      envPrelude(shell, preludeFor(spec.limits, 'service', joinsByDescriptor ? procsFiles.length : 0)),
      shell,
      inner,
    ];
    const passFds: number[] = [];
    let child: ChildProcess;
    try {
      const cmd = buildEnterCommand(
        this.opts.pid1.pid,
        argv,
        spec.identity,
        spec.tools,
        joinsByDescriptor ? [] : procsFiles,
        specNetwork(spec),
        templateEntryOf(spec, keeperScript),
      );
      if (joinsByDescriptor) for (const f of procsFiles) passFds.push(openSync(f, 'w'));
      child = spawn(cmd.file, cmd.args, {
        cwd: dir,
        env: { PATH: sandboxPath() },
        ...(cmd.uid !== undefined ? { uid: cmd.uid, gid: cmd.gid } : {}),
        stdio: ['pipe', 'pipe', isDebugOn(process.env) ? 2 : 'ignore', 'pipe', 'pipe', ...passFds],
      });
    } catch {
      return null;
    } finally {
      for (const fd of passFds) closeSync(fd);
    }
    child.on('error', () => {});
    const bundlePipe = child.stdio[BUNDLE_FD] as Writable;
    bundlePipe.on('error', () => {}); // a sandbox that has the file never reads it
    bundlePipe.end(bundle);
    const envPipe = child.stdio[4] as Writable;
    envPipe.on('error', () => {});
    envPipe.end(exportScript(residentEnv(spec, nodePath)));
    return child;
  }

  /** Writes resident.json once the resident greeted: its host pid is found below the entering process. */
  private record(child: ChildProcess): void {
    const ns = pidNamespace(this.opts.pid1.pid);
    const pid = child.pid !== undefined && ns ? enteredPid(child.pid, ns) : null;
    this.write({ ...this.counts(), resident: pid !== null ? identify(pid) : null, last_exit: null, idle_at_ms: null });
  }

  private recordDown(status: number | null): void {
    this.write({ ...this.counts(), resident: null, last_exit: status, idle_at_ms: null });
  }

  private counts(): Pick<ResidentRecord, 'version' | 'restarts' | 'idle_exits'> {
    return { version: 1, restarts: this.restarts, idle_exits: this.idleExits };
  }

  private write(record: ResidentRecord): void {
    try {
      writePrivateFile(join(this.opts.dir, RESIDENT_FILE), JSON.stringify(record) + '\n');
    } catch {
      // the state directory is going away with the sandbox
    }
  }
}

/**
 * How the resident's node is run: on the agent runtime (the server's node bound into the sandbox,
 * through its loader: a template's root may have no node, or no libc) where the sandbox has one,
 * else the keeper's own node (a sandbox from before the runtime sees the host's).
 */
function residentNode(spec: SandboxSpec, nodePath: string): string[] {
  return spec.runtimeDir !== undefined ? agentRuntimeArgv(NODE_FLAGS) : [nodePath, ...NODE_FLAGS];
}

/** Where the agent's node processes keep their compile cache (see residentEnv). */
export const AGENT_COMPILE_CACHE_DIR = `${SANDBOX_HOME}/.local/state/sandbox-agent/node-compile-cache`;

/** The resident's environment: the login one (as every command's starts) and the sandbox's agent settings. */
function residentEnv(spec: SandboxSpec, nodePath: string): Record<string, string> {
  const own = Object.fromEntries(Object.entries(spec.envs).filter(([name]) => name.startsWith('SANDBOX_AGENT_') || name === 'AGENT_DEBUG'));
  return {
    HOME: SANDBOX_HOME,
    PATH: sandboxPathFor({ isTemplate: spec.root !== undefined, hasRuntime: spec.runtimeDir !== undefined }, nodeBinDirsOf(nodePath)),
    LANG: 'C.UTF-8',
    // As every command's login environment: root in a template sandbox (whose files are root's).
    USER: spec.root ? 'root' : 'user',
    LOGNAME: spec.root ? 'root' : 'user',
    SHELL: spec.shell,
    // One malloc arena and one libuv worker: fewer threads count against the sandbox's process limit.
    MALLOC_ARENA_MAX: '2',
    UV_THREADPOOL_SIZE: '1',
    // Node 22+ keeps the agent's compiled code here (Node 20 ignores it): each later start of the
    // resident, and of every supervisor it boots, reads it instead of compiling the agent again
    // (8-10 ms less of a 47-57 ms start). In the agent's state folder, which templates do not
    // carry over; never passed on to a command (agent/task-env.ts).
    [AGENT_COMPILE_CACHE_VAR]: AGENT_COMPILE_CACHE_DIR,
    ...own,
  };
}

/** The process below `pid` (nsenter forks into the namespace) that lives in pid namespace `ns`. */
function enteredPid(pid: number, ns: string): number | null {
  const queue = [pid];
  for (let i = 0; i < queue.length && i < 64; i++) {
    const p = queue[i]!;
    if (pidNamespace(p) === ns) return p;
    try {
      for (const task of readdirSync(`/proc/${p}/task`)) {
        const children = readFileSync(`/proc/${p}/task/${task}/children`, 'utf8').trim();
        if (children) queue.push(...children.split(' ').map(Number));
      }
    } catch {
      // exited meanwhile
    }
  }
  return null;
}
