// cpu, memory and pids limits for a sandbox, as cgroups the keeper creates next to its own. Works
// with cgroup v1 controllers (as root; also hybrid hosts) and with a cgroup v2 subtree where the
// controllers are delegated to us. A limit the caller asked for (cpu, memory) is required: where
// it cannot be enforced that is reported, never ignored. The defaults every sandbox gets (pids,
// the default memory limit) are enforced where they can be and left to the other layers elsewhere.
import { createHash } from 'node:crypto';
import { chownSync, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, posix } from 'node:path';

/** Limits to enforce; an absent field is not limited. */
export interface CgroupLimits {
  cpu?: number;
  memoryMb?: number;
  pidsMax?: number;
}

/** Which of the limits must hold: when one cannot, createCgroups fails instead of going without. */
export interface CgroupRequired {
  cpu: boolean;
  memory: boolean;
}

/**
 * The parent cgroup every sandbox of one state directory is made in (where it can be), whose
 * memory limit bounds all of them together. Shared: each keeper makes it if missing and writes
 * its limit; the last one to leave removes it.
 */
export interface CgroupCeiling {
  /** Its directory name (ceilingCgroupName). */
  name: string;
  /** The memory all the sandboxes below it may use together, in MiB. */
  memoryMb: number;
}

/** The cgroups made for a sandbox and the limits they enforce. */
export interface SandboxCgroups {
  /** Directories (each has a cgroup.procs to join); empty when none could be made. */
  dirs: string[];
  /** 1 or 2 (the hierarchy they are in), null when there are none. */
  version: 1 | 2 | null;
  /** The subset of the requested limits that is enforced. */
  enforced: CgroupLimits;
  /** The memory ceiling the sandbox's memory cgroup is under (MiB, as the parent holds it), null when none. */
  ceilingMemoryMb?: number | null;
}

/** Names of parent cgroups start with this (so a clean-up can tell them from a sandbox's own). */
const CEILING_PREFIX = 'sandbox-mcp-all-';

/** The ceiling cgroup's name for the sandboxes directory `sandboxes`: one per state directory. */
export function ceilingCgroupName(sandboxes: string): string {
  return CEILING_PREFIX + createHash('sha256').update(sandboxes).digest('hex').slice(0, 12);
}

/** Removes the ceiling cgroups above `dirs` once no sandbox is left below them; never throws. */
export function removeEmptyCeilings(dirs: readonly string[]): void {
  for (const parent of new Set(dirs.map((d) => dirname(d)))) {
    if (!basename(parent).startsWith(CEILING_PREFIX)) continue;
    try {
      rmdirSync(parent);
    } catch {
      // Another sandbox is still below it (EBUSY), or it is gone already.
    }
  }
}

/** Why limits cannot be enforced here: a static code, explained by the provider. */
export class CgroupUnavailableError extends Error {
  constructor(readonly code: 'cgroup_unavailable') {
    super(code);
    this.name = 'CgroupUnavailableError';
  }
}

const CFS_PERIOD_US = 100_000;
const MIB = 1024 * 1024;

interface MountInfo {
  root: string;
  mountPoint: string;
  fsType: string;
  superOptions: string[];
}

function readMounts(): MountInfo[] {
  const mounts: MountInfo[] = [];
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const pre = line.slice(0, sep).split(' ');
    const post = line.slice(sep + 3).split(' ');
    mounts.push({
      root: unescapeMount(pre[3] ?? ''),
      mountPoint: unescapeMount(pre[4] ?? ''),
      fsType: post[0] ?? '',
      superOptions: (post[2] ?? '').split(','),
    });
  }
  return mounts;
}

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)));
}

/** Our own cgroup path per hierarchy: v1 controller name (or '' for v2) → path. */
function ownCgroups(): Map<string, string> {
  const own = new Map<string, string>();
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
    const m = /^(\d+):([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    const controllers = m[2] ?? '';
    if (controllers === '') own.set('', m[3] ?? '/');
    else for (const c of controllers.split(',')) own.set(c, m[3] ?? '/');
  }
  return own;
}

/** Host path of our own cgroup in the mount, accounting for a mount rooted below the hierarchy root. */
function hostPath(mount: MountInfo, ownPath: string): string | null {
  const root = mount.root === '/' ? '' : mount.root;
  if (root !== '' && !(ownPath === root || ownPath.startsWith(root + '/'))) return null;
  return join(mount.mountPoint, ownPath.slice(root.length));
}

function writeKnob(dir: string, file: string, value: string): void {
  writeFileSync(join(dir, file), value);
}

const NONE: SandboxCgroups = { dirs: [], version: null, enforced: {} };

/**
 * Creates the sandbox's cgroup(s) and applies the limits; returns the directories and what they
 * enforce. Throws CgroupUnavailableError, after removing whatever it created, when a required
 * limit cannot be enforced.
 */
export function createCgroups(
  name: string,
  limits: CgroupLimits,
  required: CgroupRequired,
  owner?: { uid: number; gid: number },
  ceiling?: CgroupCeiling,
): SandboxCgroups {
  if (limits.cpu === undefined && limits.memoryMb === undefined && limits.pidsMax === undefined) return NONE;
  const created: string[] = [];
  try {
    const mounts = readMounts();
    const own = ownCgroups();
    // A keeper removing the (then empty) ceiling between our making it and our child in it makes
    // the child's mkdir fail with ENOENT: make both again.
    let made: SandboxCgroups | null = null;
    for (let attempt = 0; ; attempt++) {
      try {
        made =
          createV1(mounts, own, name, limits, required, created, ceiling) ??
          createV2(mounts, own, name, limits, required, created, ceiling);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 3) throw e;
        removeCgroupsNow(created.splice(0));
      }
    }
    if (!made) {
      if (required.cpu || required.memory) throw new CgroupUnavailableError('cgroup_unavailable');
      return NONE;
    }
    // Commands enter as the sandbox uid and may join the cgroup themselves; inside the sandbox
    // /sys is read-only, so this grants nothing to the sandbox's own processes.
    if (owner) for (const dir of made.dirs) chownSync(join(dir, 'cgroup.procs'), owner.uid, owner.gid);
    return made;
  } catch {
    removeCgroupsNow(created);
    throw new CgroupUnavailableError('cgroup_unavailable');
  }
}

/** The controllers `limits` needs, each with whether it must hold. */
function wanted(limits: CgroupLimits, required: CgroupRequired): { controller: 'cpu' | 'memory' | 'pids'; isRequired: boolean }[] {
  const out: { controller: 'cpu' | 'memory' | 'pids'; isRequired: boolean }[] = [];
  if (limits.cpu !== undefined) out.push({ controller: 'cpu', isRequired: required.cpu });
  if (limits.memoryMb !== undefined) out.push({ controller: 'memory', isRequired: required.memory });
  if (limits.pidsMax !== undefined) out.push({ controller: 'pids', isRequired: false });
  return out;
}

/**
 * cgroup v1: one cgroup per controller, below our own. Null when a required controller has no
 * v1 hierarchy (try v2); throws when one has but its cgroup cannot be made; an optional
 * controller that cannot be made is left out.
 */
function createV1(
  mounts: MountInfo[],
  own: Map<string, string>,
  name: string,
  limits: CgroupLimits,
  required: CgroupRequired,
  created: string[],
  ceiling: CgroupCeiling | undefined,
): SandboxCgroups | null {
  const v1 = (controller: string) => mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(controller));
  const want = wanted(limits, required);
  if (want.some((w) => w.isRequired && !v1(w.controller))) return null;
  const enforced: CgroupLimits = {};
  const dirs: string[] = [];
  let ceilingMemoryMb: number | null = null;
  for (const { controller, isRequired } of want) {
    const mount = v1(controller);
    if (!mount) continue;
    let dir: string;
    try {
      // The memory cgroup goes below the state directory's ceiling where one can be made.
      const parent = controller === 'memory' && ceiling ? ceilingV1(mount, own.get(controller), ceiling) : null;
      if (parent) ceilingMemoryMb = parent.memoryMb;
      dir = parent ? makeChildIn(parent.dir, name, created) : makeChild(mount, own.get(controller), name, created);
      limitV1(dir, controller, limits);
    } catch (e) {
      if (isRequired || (e as NodeJS.ErrnoException).code === 'ENOENT') throw e;
      removeCgroupsNow(created.splice(dirs.length));
      continue;
    }
    dirs.push(dir);
    copyLimit(enforced, controller, limits);
  }
  return dirs.length > 0 ? { dirs, version: 1, enforced, ceilingMemoryMb } : null;
}

/** The v1 memory ceiling below our own memory cgroup, made if missing, its limit set; null when it cannot be. */
function ceilingV1(mount: MountInfo, ownPath: string | undefined, ceiling: CgroupCeiling): { dir: string; memoryMb: number } | null {
  const parent = hostPath(mount, ownPath ?? '/');
  if (parent === null) return null;
  const dir = join(parent, ceiling.name);
  try {
    mkdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return null;
  }
  try {
    setMemoryLimitV1(dir, ceiling.memoryMb * MIB);
  } catch {
    // Below what its sandboxes use now (EBUSY): the limit it has stays.
  }
  try {
    return { dir, memoryMb: Math.floor(Number(readFileSync(join(dir, 'memory.limit_in_bytes'), 'utf8').trim()) / MIB) };
  } catch {
    return null;
  }
}

/**
 * Sets a v1 memory limit, and the memory+swap one to the same (where swap accounting is on): the
 * memory+swap limit may never be below the memory limit, so which is written first depends on
 * whether the limit goes up or down.
 */
function setMemoryLimitV1(dir: string, bytes: number): void {
  const memsw = join(dir, 'memory.memsw.limit_in_bytes');
  if (!existsSync(memsw)) return writeKnob(dir, 'memory.limit_in_bytes', String(bytes));
  try {
    writeKnob(dir, 'memory.limit_in_bytes', String(bytes));
    writeKnob(dir, 'memory.memsw.limit_in_bytes', String(bytes));
  } catch {
    writeKnob(dir, 'memory.memsw.limit_in_bytes', String(bytes));
    writeKnob(dir, 'memory.limit_in_bytes', String(bytes));
  }
}

function limitV1(dir: string, controller: 'cpu' | 'memory' | 'pids', limits: CgroupLimits): void {
  if (controller === 'cpu') {
    writeKnob(dir, 'cpu.cfs_period_us', String(CFS_PERIOD_US));
    writeKnob(dir, 'cpu.cfs_quota_us', String(Math.round(limits.cpu! * CFS_PERIOD_US)));
  } else if (controller === 'memory') {
    // With memory+swap too: without it, swap would let the sandbox exceed its limit.
    setMemoryLimitV1(dir, limits.memoryMb! * MIB);
  } else {
    writeKnob(dir, 'pids.max', String(limits.pidsMax!));
  }
}

function copyLimit(enforced: CgroupLimits, controller: 'cpu' | 'memory' | 'pids', limits: CgroupLimits): void {
  if (controller === 'cpu') enforced.cpu = limits.cpu!;
  else if (controller === 'memory') enforced.memoryMb = limits.memoryMb!;
  else enforced.pidsMax = limits.pidsMax!;
}

/**
 * cgroup v2: one cgroup with every controller it can have. Beside our own cgroup (its parent
 * enables controllers for its children, ours included, and may be delegated to us); else, as
 * root, at the top of the hierarchy, whose controllers systemd enables. Not below ours: a cgroup
 * holding processes cannot enable any for children. Null when none can be made with the required ones.
 */
function createV2(
  mounts: MountInfo[],
  own: Map<string, string>,
  name: string,
  limits: CgroupLimits,
  required: CgroupRequired,
  created: string[],
  ceiling: CgroupCeiling | undefined,
): SandboxCgroups | null {
  const v2 = mounts.find((m) => m.fsType === 'cgroup2');
  if (!v2) return null;
  const want = wanted(limits, required);
  for (const parentPath of new Set([posix.dirname(own.get('') ?? '/'), v2.root])) {
    let dir: string;
    const parent = ceiling
      ? ceilingV2(
          v2,
          parentPath,
          ceiling,
          want.map((w) => w.controller),
        )
      : null;
    try {
      dir = parent ? makeChildIn(parent.dir, name, created) : makeChild(v2, parentPath, name, created);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT' && parent) throw e;
      continue;
    }
    const available = readFileSync(join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
    const usable = want.filter((w) => available.includes(w.controller));
    if (want.some((w) => w.isRequired && !available.includes(w.controller)) || usable.length === 0) {
      rmdirSync(dir);
      created.pop();
      continue;
    }
    const enforced: CgroupLimits = {};
    for (const { controller } of usable) {
      if (controller === 'cpu') writeKnob(dir, 'cpu.max', `${Math.round(limits.cpu! * CFS_PERIOD_US)} ${CFS_PERIOD_US}`);
      else if (controller === 'memory') {
        writeKnob(dir, 'memory.max', String(limits.memoryMb! * MIB));
        if (existsSync(join(dir, 'memory.swap.max'))) writeKnob(dir, 'memory.swap.max', '0');
      } else writeKnob(dir, 'pids.max', String(limits.pidsMax!));
      copyLimit(enforced, controller, limits);
    }
    return { dirs: [dir], version: 2, enforced, ceilingMemoryMb: parent?.memoryMb ?? null };
  }
  return null;
}

/**
 * The v2 ceiling below `parentPath`: made if missing, the wanted controllers it is offered enabled
 * for its children, its memory.max set. Null when it cannot be made or holds no memory limit.
 */
function ceilingV2(
  mount: MountInfo,
  parentPath: string,
  ceiling: CgroupCeiling,
  controllers: readonly string[],
): { dir: string; memoryMb: number } | null {
  const parent = hostPath(mount, parentPath);
  if (parent === null) return null;
  const dir = join(parent, ceiling.name);
  try {
    try {
      mkdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return null;
    }
    const offered = readFileSync(join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
    if (!offered.includes('memory')) return null;
    const enable = controllers.filter((c) => offered.includes(c));
    writeKnob(dir, 'cgroup.subtree_control', enable.map((c) => `+${c}`).join(' '));
    writeKnob(dir, 'memory.max', String(ceiling.memoryMb * MIB));
    if (existsSync(join(dir, 'memory.swap.max'))) writeKnob(dir, 'memory.swap.max', '0');
    return { dir, memoryMb: ceiling.memoryMb };
  } catch {
    return null;
  }
}

function makeChild(mount: MountInfo, ownPath: string | undefined, name: string, created: string[]): string {
  const parent = hostPath(mount, ownPath ?? '/');
  if (parent === null) throw new CgroupUnavailableError('cgroup_unavailable');
  return makeChildIn(parent, name, created);
}

function makeChildIn(parent: string, name: string, created: string[]): string {
  const dir = join(parent, name);
  mkdirSync(dir);
  created.push(dir);
  return dir;
}

/** Removes the cgroups that are empty now; returns those left (still busy), never throws. */
export function removeCgroupsNow(dirs: readonly string[]): string[] {
  const left: string[] = [];
  for (const dir of dirs) {
    try {
      rmdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') left.push(dir);
    }
  }
  return left;
}

/** Removes the cgroups, retrying while their last processes exit (EBUSY); true when all are gone. */
export async function removeCgroups(dirs: readonly string[], timeoutMs = 3000, pollMs = 10): Promise<boolean> {
  let left = removeCgroupsNow(dirs);
  const giveUpAtMs = Date.now() + timeoutMs;
  while (left.length > 0 && Date.now() < giveUpAtMs) {
    await new Promise((r) => setTimeout(r, pollMs));
    left = removeCgroupsNow(left);
  }
  return left.length === 0;
}

/** The cgroup hierarchies this process sees: v1 controllers, a v2 tree, both (hybrid) or none. */
export type CgroupVersion = 'v1' | 'v2' | 'hybrid' | 'none';

/**
 * Which cgroup version this process sees and which of the controllers limits may use it offers:
 * v1 mounts the controller; v2 enables it in the subtree of our own cgroup's parent (where
 * createCgroups makes a sandbox's cgroup first). Reads only; creates nothing.
 */
export function describeCgroups(wanted: readonly string[] = ['cpu', 'memory', 'pids']): { version: CgroupVersion; controllers: string[] } {
  const mounts = readMounts();
  const v1 = mounts.filter((m) => m.fsType === 'cgroup');
  const v2 = mounts.find((m) => m.fsType === 'cgroup2');
  const version: CgroupVersion = v1.length > 0 ? (v2 ? 'hybrid' : 'v1') : v2 ? 'v2' : 'none';
  const offered = new Set<string>();
  for (const m of v1) for (const c of wanted) if (m.superOptions.includes(c)) offered.add(c);
  if (v2 && v1.length === 0) {
    const parent = hostPath(v2, posix.dirname(ownCgroups().get('') ?? '/'));
    try {
      if (parent !== null) for (const c of readFileSync(join(parent, 'cgroup.subtree_control'), 'utf8').trim().split(/\s+/)) offered.add(c);
    } catch {
      // Not readable: nothing is known to be offered.
    }
  }
  return { version, controllers: wanted.filter((c) => offered.has(c)) };
}

/**
 * True when a memory cgroup can be made here the way a keeper makes a sandbox's (tried: a probe
 * cgroup made and removed at once). What the server's start-up warning asks, a few mkdirs.
 */
export function canLimitMemory(): boolean {
  try {
    const made = createCgroups(`sandbox-mcp-probe-${process.pid}`, { memoryMb: 64 }, { cpu: false, memory: true });
    removeCgroupsNow(made.dirs);
    return made.enforced.memoryMb !== undefined;
  } catch {
    return false;
  }
}
