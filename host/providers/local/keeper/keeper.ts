// The keeper: one detached host process per sandbox, started as `node dist/keeper.cjs <dir>`.
// It runs bubblewrap as its direct child (if the keeper dies, so does the sandbox), reports
// readiness on fd 3, and owns the deadline: at end_at — whether or not any server is running —
// it SIGKILLs the sandbox's pid 1 (which takes everything inside with it), gives back what it
// holds (cgroups), removes the state directory, and exits. SIGTERM means "now" (kill_sandbox);
// SIGUSR1 means "the deadline file changed" (set_sandbox_timeout). Read runKeeper top to bottom:
// each phase is a function below it, and everything they share is one KeeperState.
import { basename, dirname, join } from 'node:path';
import { createLogger, isDebugOn } from '../../../util/log.js';
import { definedFields } from '../../../util/defined-fields.js';
import { writableMountSizes } from '../limits/disk-shares.js';
import type { EnforcedLimits } from '../limits/enforced.js';
import { boundSandboxIpc } from '../limits/ipc-bounds.js';
import { exemptFromOomKiller } from '../limits/oom-protection.js';
import { pidsMaxFor } from '../limits/process-tiers.js';
import { diskBudgetMb } from '../limits/sandbox-limits.js';
import type { SandboxSpec } from '../sandbox/spec.js';
import {
  readDeadline,
  readSpec,
  removeSandboxDir,
  writeCgroupsList,
  writeEndingMark,
  writePrivateFile,
  KEEPER_FILE,
  type KeeperRecord,
} from '../sandbox/state-dir.js';
import { ceilingCgroupName, CgroupUnavailableError, createCgroups, type SandboxCgroups } from '../system/cgroups.js';
import { identify, killNamespaceEnterers, pidNamespace, signalIfAlive, ticksSinceBoot, type ProcIdentity } from '../system/proc.js';
import { FIRST_CALL_TASKS, isOutOfProcesses, shortOfProcesses } from '../system/user-processes.js';
import { EgressProxyStartError, openSandboxNetwork } from '../network/sandbox-network.js';
import { isHelperArch } from '../launch/perl-helpers.js';
import { forbidUserNamespaces } from '../limits/userns-limit.js';
import { spawnBwrap, type BwrapProcess, type BwrapStart } from './bwrap-process.js';
import { LaunchPrepareError, prepareLaunch, readKeeperHelper, type SandboxLaunch } from './launch-command.js';
import { heldCgroups, HeldResources, type HeldResource } from './held-resources.js';
import { openResidentRelay, type ResidentStart } from './resident.js';
import { reportOnce, type KeeperReport } from './report.js';
import { collectStartupGarbageOnce } from './startup-garbage.js';

/** Timings and the report descriptor of runKeeper; every one has a working default. */
export interface KeeperOpts {
  /** Descriptor of the readiness pipe from the provider. */
  reportFd?: number;
  /** How long bwrap may take to report a ready pid 1. */
  startTimeoutMs?: number;
  /** Re-read the deadline file at least this often (covers a lost SIGUSR1 or removed state). */
  recheckMs?: number;
  /** How long to wait for bwrap to exit after its pid 1 was killed. */
  exitWaitMs?: number;
}

/** Everything the keeper's phases share, filled in as they run. */
interface KeeperState {
  readonly dir: string;
  readonly spec: SandboxSpec;
  /** Aborted by whatever ends the sandbox: SIGTERM, the deadline, pid 1's end, a fault of the keeper. */
  readonly ending: AbortController;
  /** What the keeper holds for the sandbox's lifetime (its cgroups, its network services; see held-resources.ts). */
  readonly held: HeldResources;
  cgroups: SandboxCgroups;
  /** What holds for the sandbox, filled in by the phases that make it hold. */
  enforced: EnforcedLimits;
  bwrap: BwrapProcess | null;
  /** The processes to kill at the end, verified by start time (set once pid 1 is ready). */
  pid1: ProcIdentity | null;
  bwrapId: ProcIdentity | null;
  /** pid 1's pid namespace, whose host-side nsenter halves must die for the namespace to end. */
  pidNs: string | null;
  /** The resident agent's relay and start (null: none could be opened). */
  resident: ResidentStart | null;
}

const READY: KeeperReport = { ok: true };

/** Entry point of the keeper (`<sandbox dir>` as the only argument); resolves only when the sandbox is gone. */
export async function runKeeper(args: string[], opts: KeeperOpts = {}): Promise<void> {
  const report = reportOnce(opts.reportFd ?? 3);
  const dir = args[0];
  const spec = dir === undefined ? null : readSpec(dir);
  if (dir === undefined || spec === null) return report({ ok: false, code: 'spec_invalid' });
  const keeper: KeeperState = {
    dir,
    spec,
    ending: new AbortController(),
    held: new HeldResources(),
    cgroups: { dirs: [], version: null, enforced: {} },
    enforced: { cpu: null, memoryMb: null, pidsMax: null, diskMb: null, oomExempt: false, sysvShmMb: null, totalMemoryMb: null },
    bwrap: null,
    pid1: null,
    bwrapId: null,
    pidNs: null,
    resident: null,
  };
  const stopListening = listenForEndings(keeper);
  // Until the sandbox is ready, anything that goes wrong (a throw included) is a start failure.
  let outcome: KeeperReport;
  try {
    outcome = makeCgroups(keeper);
    if (outcome.ok) outcome = await launchBwrap(keeper, opts.startTimeoutMs ?? 15_000);
    if (outcome.ok) outcome = exemptCoreFromOomKiller(keeper);
    if (outcome.ok) outcome = await forbidNestedUserNamespaces(keeper);
    if (outcome.ok) outcome = await boundIpc(keeper);
    if (outcome.ok) outcome = await openNetwork(keeper);
    if (outcome.ok) outcome = await openResident(keeper);
    if (outcome.ok) outcome = recordKeeper(keeper);
    if (outcome.ok) outcome = roomForFirstCall();
    if (outcome.ok) {
      report(READY);
      // After READY: a node start-up must not lengthen create.
      keeper.resident?.launch();
      collectStartupGarbageOnce();
      await superviseDeadline(keeper, opts.recheckMs ?? 30_000);
    }
  } catch (e) {
    logFault(e);
    outcome = { ok: false, code: 'keeper_failed' };
  }
  await terminate(keeper, opts.exitWaitMs ?? 5_000);
  // A failure is reported only now, so that nothing of the failed sandbox outlives the report.
  report(outcome);
  removeSandboxDir(dirname(dir), basename(dir));
  stopListening();
  await keeper.bwrap?.exited;
}

/**
 * Routes every way the keeper can be told or forced to end into `keeper.ending`, and gives back
 * what it holds if the process exits anyway. Returns the function that stops listening.
 */
function listenForEndings(keeper: KeeperState): () => void {
  const end = (): void => keeper.ending.abort();
  const onFault = (e: unknown): void => {
    logFault(e);
    end();
  };
  const ignore = (): void => {};
  const releaseNow = (): void => keeper.held.releaseAllNow();
  // A detached keeper has no terminal; these must never end it by accident.
  process.on('SIGHUP', ignore);
  process.on('SIGINT', ignore);
  process.on('SIGTERM', end);
  process.on('uncaughtException', onFault);
  process.on('unhandledRejection', onFault);
  // Stays registered: a last synchronous try for whatever could not be released in time.
  process.on('exit', releaseNow);
  return () => {
    process.off('SIGTERM', end);
    process.off('uncaughtException', onFault);
    process.off('unhandledRejection', onFault);
  };
}

/**
 * Creates the sandbox's cgroups — cpu and memory when create asked (required), pids and the
 * default memory limit otherwise (where they can be made) — holds them until the end and lists
 * them in the state.
 */
function makeCgroups(keeper: KeeperState): KeeperReport {
  const { spec } = keeper;
  try {
    keeper.cgroups = createCgroups(
      `sandbox-mcp-${spec.id}`,
      definedFields({
        cpu: spec.cpu ?? undefined,
        memoryMb: spec.memoryMb ?? spec.limits?.memoryMb,
        pidsMax: spec.limits ? pidsMaxFor(spec.limits.processes) : undefined,
      }),
      { cpu: spec.cpu !== null, memory: spec.memoryMb !== null },
      spec.identity.dropPrivileges ? spec.identity : undefined,
      // All sandboxes of the state directory share one parent, whose memory limit bounds them together.
      spec.limits?.totalMemoryMb !== undefined
        ? { name: ceilingCgroupName(dirname(keeper.dir)), memoryMb: spec.limits.totalMemoryMb }
        : undefined,
    );
  } catch (e) {
    return { ok: false, code: e instanceof CgroupUnavailableError ? e.code : 'cgroup_unavailable' };
  }
  const { dirs, enforced } = keeper.cgroups;
  keeper.held.hold(heldCgroups(dirs));
  if (dirs.length > 0) writeCgroupsList(keeper.dir, dirs);
  keeper.enforced = {
    ...keeper.enforced,
    cpu: enforced.cpu ?? null,
    memoryMb: enforced.memoryMb ?? null,
    pidsMax: enforced.pidsMax ?? null,
    totalMemoryMb: enforced.memoryMb !== undefined ? (keeper.cgroups.ceilingMemoryMb ?? null) : null,
  };
  return READY;
}

/**
 * Spawns bwrap, its writable mounts sized to the disk budget, and waits until pid 1 is ready,
 * bwrap fails, the start times out or the keeper is told to end. A bubblewrap without --size
 * (before 0.7) gets a second try without sizes: the other layers still hold.
 */
async function launchBwrap(keeper: KeeperState, startTimeoutMs: number): Promise<KeeperReport> {
  const { limits } = keeper.spec;
  keeper.enforced.diskMb = limits ? diskBudgetMb(limits.diskMb, keeper.enforced.memoryMb) : null;
  let started = await startBwrap(keeper, startTimeoutMs);
  // A template's writable root, or a workspace, is never unsized (the launch helper sizes it).
  const mayRetryUnsized = keeper.enforced.diskMb !== null && !keeper.spec.root && !keeper.spec.workspace;
  if (started !== 'aborted' && 'failure' in started && started.sizeUnsupported && mayRetryUnsized) {
    keeper.enforced.diskMb = null;
    started = await startBwrap(keeper, startTimeoutMs);
  }
  if (started === 'aborted') return { ok: false, code: 'keeper_failed' };
  if ('failure' in started) return { ok: false, code: started.failure };
  keeper.pidNs = pidNamespace(started.pid1);
  keeper.pid1 = identify(started.pid1);
  keeper.bwrapId = keeper.bwrap?.child.pid !== undefined ? identify(keeper.bwrap.child.pid) : null;
  return READY;
}

/** One launch attempt, the writable mounts sized to keeper.enforced.diskMb (null: unsized). */
async function startBwrap(keeper: KeeperState, startTimeoutMs: number): Promise<BwrapStart | 'aborted'> {
  const { diskMb } = keeper.enforced;
  let launch: SandboxLaunch;
  try {
    launch = prepareLaunch(
      keeper.spec,
      keeper.dir,
      diskMb === null ? undefined : writableMountSizes(diskMb, keeper.spec.root !== undefined, keeper.spec.workspace !== undefined),
    );
  } catch (e) {
    return { failure: e instanceof LaunchPrepareError ? e.code : 'keeper_failed' };
  }
  const bwrap = spawnBwrap(launch, startTimeoutMs);
  keeper.bwrap = bwrap;
  return Promise.race([bwrap.started, whenAborted(keeper.ending.signal)]);
}

/** As root, exempts pid 1 and bwrap from the OOM killer (limits/oom-protection.ts); best effort otherwise. */
function exemptCoreFromOomKiller(keeper: KeeperState): KeeperReport {
  const pids = [keeper.pid1?.pid, keeper.bwrapId?.pid].filter((p): p is number => p !== undefined);
  keeper.enforced.oomExempt = exemptFromOomKiller(pids);
  return READY;
}

/**
 * Forbids new user namespaces inside the sandbox (limits/userns-limit.ts) before any command can
 * enter. Required: a sandbox where it does not hold does not start.
 */
async function forbidNestedUserNamespaces(keeper: KeeperState): Promise<KeeperReport> {
  const { tools } = keeper.spec;
  if (!keeper.pid1 || !isHelperArch(process.arch)) return { ok: false, code: 'userns_limit_failed' };
  let text: string;
  try {
    text = readKeeperHelper('userns-off');
  } catch {
    return { ok: false, code: 'keeper_failed' };
  }
  const held = await forbidUserNamespaces(tools.perl ?? 'perl', { text, arch: process.arch }, keeper.pid1.pid);
  return held ? READY : { ok: false, code: 'userns_limit_failed' };
}

/**
 * Bounds the sandbox's SysV IPC in its IPC namespace (limits/ipc-bounds.ts), shared memory to
 * /dev/shm's share of the disk budget, before any command can enter. Best effort, like the OOM
 * exemption: only a keeper running as root may write a base sandbox's sysctls; a template
 * sandbox's are its namespace root's (its identity), whoever the keeper runs as.
 */
async function boundIpc(keeper: KeeperState): Promise<KeeperReport> {
  const { limits, root, identity } = keeper.spec;
  if (!limits || !keeper.pid1) return READY;
  // The budget bubblewrap could not size the mounts to (before 0.7) still bounds shared memory.
  const diskMb = keeper.enforced.diskMb ?? diskBudgetMb(limits.diskMb, keeper.enforced.memoryMb);
  const shmBytes = writableMountSizes(diskMb, root !== undefined, keeper.spec.workspace !== undefined)['/dev/shm']!;
  const namespaceRoot = root ? { uid: identity.uid, gid: identity.gid } : undefined;
  keeper.enforced.sysvShmMb = await boundSandboxIpc(keeper.spec.tools, keeper.pid1.pid, shmBytes, namespaceRoot);
  return READY;
}

/**
 * Opens the host side of the sandbox's network (its egress proxy, the control socket for exposed
 * ports; see network/sandbox-network.ts) and holds it until the end. Before readiness: a sandbox
 * whose allow-list cannot be enforced must not start.
 */
async function openNetwork(keeper: KeeperState): Promise<KeeperReport> {
  let network: HeldResource | null;
  try {
    network = await openSandboxNetwork({
      dir: keeper.dir,
      spec: keeper.spec,
      pid1: keeper.pid1!.pid,
      nodePath: process.execPath,
      keeperScript: process.argv[1]!,
    });
  } catch (e) {
    logFault(e);
    if (!(e instanceof EgressProxyStartError)) return { ok: false, code: 'keeper_failed' };
    // No helper for want of processes or memory (near the user's process limit, say): said as that.
    return { ok: false, code: isOutOfProcesses(e.code) ? 'start_out_of_resources' : 'network_failed' };
  }
  if (network) keeper.held.hold(network);
  return READY;
}

/**
 * Fails the start when the server's user is too near its process limit for what the sandbox runs
 * next (its resident, a first call; FIRST_CALL_TASKS): reported ready, its calls would fail or
 * wait, each its own way. Said as out of processes, which a create near the limit names as that.
 */
function roomForFirstCall(): KeeperReport {
  return shortOfProcesses(FIRST_CALL_TASKS) ? { ok: false, code: 'start_out_of_resources' } : READY;
}

/** Writes keeper.json, the record by which every server finds and verifies this sandbox. */
function recordKeeper(keeper: KeeperState): KeeperReport {
  const self = identify(process.pid);
  if (!self || !keeper.pid1 || !keeper.bwrapId) return { ok: false, code: 'bwrap_failed' };
  const record: KeeperRecord = {
    version: 1,
    keeper: self,
    bwrap: keeper.bwrapId,
    pid1: keeper.pid1,
    cgroups: keeper.cgroups.dirs,
    enforced: keeper.enforced,
    // cgroup v1 lets a process move itself with a descriptor opened by root: cheaper than a join script.
    ...definedFields({
      cgroupJoin: keeper.cgroups.version === 1 ? ('descriptor' as const) : undefined,
      resident: keeper.resident ? (true as const) : undefined,
    }),
  };
  writePrivateFile(join(keeper.dir, KEEPER_FILE), JSON.stringify(record) + '\n');
  return READY;
}

/**
 * Opens the relay to the sandbox's resident agent (keeper/resident.ts), held until the end; the
 * resident itself starts once the sandbox is ready. Best effort: without it servers run each agent
 * call as a process of its own, as for a sandbox of an older keeper.
 */
async function openResident(keeper: KeeperState): Promise<KeeperReport> {
  // A template sandbox has one too: it runs on the agent runtime (the server's node, bound in), so a
  // root with no node, or nothing but a shell, has a resident like any other.
  if (keeper.spec.resident === false) return READY;
  try {
    keeper.resident = await openResidentRelay({
      dir: keeper.dir,
      spec: keeper.spec,
      pid1: keeper.pid1!,
      cgroups: keeper.cgroups.dirs,
      joinsByDescriptor: keeper.cgroups.version === 1,
      nodePath: process.execPath,
      keeperScript: process.argv[1]!,
    });
    keeper.held.hold(keeper.resident.held);
  } catch (e) {
    logFault(e);
  }
  return READY;
}

/**
 * Resolves once the sandbox must end: its deadline passed or its deadline file is gone (someone
 * removed the state: the sandbox must not outlive it), pid 1 ended, SIGTERM, or a fault. SIGUSR1
 * re-reads the deadline; so does a recheck timer, in case a signal was lost. Taking this listener
 * off afterwards is safe: main.ts's own SIGUSR1 listener stays until exit, so a late SIGUSR1
 * never opens Node's inspector.
 */
async function superviseDeadline(keeper: KeeperState, recheckMs: number): Promise<void> {
  const { ending } = keeper;
  const bwrap = keeper.bwrap!;
  let timer: NodeJS.Timeout | undefined;
  const checkDeadline = (): void => {
    clearTimeout(timer);
    if (ending.signal.aborted) return;
    const endAtMs = readDeadline(keeper.dir);
    if (endAtMs === null || endAtMs <= Date.now()) return ending.abort();
    timer = setTimeout(checkDeadline, Math.min(endAtMs - Date.now(), recheckMs));
  };
  // pid 1 died some other way (killed from the host): end just the same.
  const onBwrapExit = (): void => ending.abort();
  bwrap.child.once('exit', onBwrapExit);
  if (bwrap.hasExited()) ending.abort();
  process.on('SIGUSR1', checkDeadline);
  try {
    checkDeadline();
    await whenAborted(ending.signal);
  } finally {
    clearTimeout(timer);
    process.off('SIGUSR1', checkDeadline);
    bwrap.child.off('exit', onBwrapExit);
  }
}

/**
 * Ends the sandbox: marks it as ending, kills pid 1 and bwrap, waits (bounded) for bwrap to exit,
 * gives back what the keeper held.
 */
async function terminate(keeper: KeeperState, exitWaitMs: number): Promise<void> {
  keeper.ending.abort();
  // Whatever enters this sandbox started before now: a later process in a namespace of the same
  // number belongs to a sandbox that got the number once this one's was freed (proc.ts, startedAfter).
  const endingAt = ticksSinceBoot();
  const { bwrap } = keeper;
  if (bwrap) {
    // Before anything dies, whatever the ending: the host-side halves of the resident and of
    // commands are killed at once, while pid 1 may take a while to be seen exiting, and a server
    // whose call lost one must read the sandbox as ending (not_found), not as alive.
    markEnding(keeper.dir);
    signalIfAlive(keeper.pid1 ?? undefined, 'SIGKILL');
    if (keeper.bwrapId) signalIfAlive(keeper.bwrapId, 'SIGKILL');
    else if (!bwrap.hasExited()) bwrap.child.kill('SIGKILL');
    // Commands entered with nsenter keep a host-side half that must reap its child before the
    // namespace can finish dying; a stopped one never would.
    const giveUpAtMs = Date.now() + exitWaitMs;
    while (!bwrap.hasExited() && Date.now() < giveUpAtMs) {
      if (keeper.pidNs) killNamespaceEnterers(keeper.pidNs, [process.pid], endingAt);
      await Promise.race([bwrap.exited, sleep(50)]);
    }
  }
  await keeper.held.releaseAll();
  for (const s of bwrap?.child.stdio ?? []) s?.destroy();
}

/** Writes the ending mark as this keeper (see writeEndingMark); best effort: the state may be gone already. */
function markEnding(dir: string): void {
  const self = identify(process.pid);
  try {
    if (self) writeEndingMark(dir, self);
  } catch {
    // The directory was removed: the sandbox must not outlive it, and no server finds it any more.
  }
}

/** Resolves with 'aborted' once `signal` is aborted (at once if it already is). */
function whenAborted(signal: AbortSignal): Promise<'aborted'> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve('aborted');
    else signal.addEventListener('abort', () => resolve('aborted'), { once: true });
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms).unref());
}

/** A fault of the keeper's own, on stderr when debugging (the keeper's stderr is /dev/null otherwise). */
function logFault(e: unknown): void {
  createLogger({ isDebug: isDebugOn(process.env) }).debug('keeper fault', {
    code: (e as NodeJS.ErrnoException | null)?.code,
  });
}
