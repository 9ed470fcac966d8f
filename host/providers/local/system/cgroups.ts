// cpu/memory limits for a sandbox, as a cgroup the keeper creates next to its own. Works with
// cgroup v1 controllers (as root; also hybrid hosts) and with a cgroup v2 subtree where the cpu
// and memory controllers are delegated to us. Anything else is reported, never ignored.
import { chownSync, existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join, posix } from 'node:path';

/** Limits to enforce; an absent field is not limited. */
export interface CgroupLimits {
  cpu?: number;
  memoryMb?: number;
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

/**
 * Creates the sandbox's cgroup(s) and applies the limits; returns the cgroup directories
 * (each has a cgroup.procs to join). Throws CgroupUnavailableError when it cannot, after
 * removing whatever it created.
 */
export function createCgroups(name: string, limits: CgroupLimits, owner?: { uid: number; gid: number }): string[] {
  const wantCpu = limits.cpu !== undefined;
  const wantMemory = limits.memoryMb !== undefined;
  if (!wantCpu && !wantMemory) return [];
  const created: string[] = [];
  try {
    const dirs = createAndLimit(name, limits, created);
    // Commands enter as the sandbox uid and join the cgroup themselves; inside the sandbox /sys
    // is read-only, so this grants nothing to the sandbox's own processes.
    if (owner) for (const dir of dirs) chownSync(join(dir, 'cgroup.procs'), owner.uid, owner.gid);
    return dirs;
  } catch {
    removeCgroupsNow(created);
    throw new CgroupUnavailableError('cgroup_unavailable');
  }
}

function createAndLimit(name: string, limits: CgroupLimits, created: string[]): string[] {
  const wantCpu = limits.cpu !== undefined;
  const wantMemory = limits.memoryMb !== undefined;
  {
    const mounts = readMounts();
    const own = ownCgroups();
    const v1 = (controller: string) => mounts.find((m) => m.fsType === 'cgroup' && m.superOptions.includes(controller));
    const cpuMount = v1('cpu');
    const memMount = v1('memory');
    if ((!wantCpu || cpuMount) && (!wantMemory || memMount)) {
      if (wantCpu && cpuMount) {
        const dir = makeChild(cpuMount, own.get('cpu'), name, created);
        writeKnob(dir, 'cpu.cfs_period_us', String(CFS_PERIOD_US));
        writeKnob(dir, 'cpu.cfs_quota_us', String(Math.round(limits.cpu! * CFS_PERIOD_US)));
      }
      if (wantMemory && memMount) {
        const dir = makeChild(memMount, own.get('memory'), name, created);
        const bytes = String(limits.memoryMb! * MIB);
        writeKnob(dir, 'memory.limit_in_bytes', bytes);
        // Without this, swap would let the sandbox exceed its limit (absent when swap accounting is off).
        if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) writeKnob(dir, 'memory.memsw.limit_in_bytes', bytes);
      }
      return created;
    }
    const v2 = mounts.find((m) => m.fsType === 'cgroup2');
    if (!v2) throw new CgroupUnavailableError('cgroup_unavailable');
    // Beside our own cgroup (its parent enables controllers for its children, ours included, and
    // may be delegated to us); else, as root, at the top of the hierarchy, whose controllers
    // systemd enables. Not below ours: a cgroup holding processes cannot enable any for children.
    for (const parentPath of new Set([posix.dirname(own.get('') ?? '/'), v2.root])) {
      const dir = makeChild(v2, parentPath, name, created);
      const available = readFileSync(join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
      if ((wantCpu && !available.includes('cpu')) || (wantMemory && !available.includes('memory'))) {
        rmdirSync(dir);
        created.pop();
        continue;
      }
      if (wantCpu) writeKnob(dir, 'cpu.max', `${Math.round(limits.cpu! * CFS_PERIOD_US)} ${CFS_PERIOD_US}`);
      if (wantMemory) {
        writeKnob(dir, 'memory.max', String(limits.memoryMb! * MIB));
        if (existsSync(join(dir, 'memory.swap.max'))) writeKnob(dir, 'memory.swap.max', '0');
      }
      return created;
    }
    throw new CgroupUnavailableError('cgroup_unavailable');
    return created;
  }
}

function makeChild(mount: MountInfo, ownPath: string | undefined, name: string, created: string[]): string {
  const parent = hostPath(mount, ownPath ?? '/');
  if (parent === null) throw new CgroupUnavailableError('cgroup_unavailable');
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
  const deadline = Date.now() + timeoutMs;
  while (left.length > 0 && Date.now() < deadline) {
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
