// Which layer enforces which limit on a given machine: the rule behind docs/local-provider.md's table and
// the doctor's report, as a pure function of what the machine offers. rlimits and read-only
// covers hold everywhere; a cgroup (root on cgroup v1, or a delegated v2 subtree) adds the
// memory limit and pids.max; bubblewrap 0.7+ sizes the writable mounts; CAP_SYS_RESOURCE lets the
// keeper exempt pid 1 and bwrap from the host's OOM killer (they are never in the sandbox's cgroups).
import { readFileSync } from 'node:fs';
import type { CgroupLimits } from '../system/cgroups.js';
import { diskBudgetMb } from './sandbox-limits.js';
import type { LimitSettings } from './settings.js';

/** What this machine offers the limits. */
export interface MachineFacts {
  /** The limits a probe cgroup could enforce here (cpu, memoryMb, pidsMax present when they could). */
  cgroup: CgroupLimits;
  /** A probe memory cgroup could be made below a parent holding a memory limit (the ceiling of all sandboxes). */
  hasCeilingCgroup: boolean;
  /** bubblewrap has --size (0.7+). */
  bwrapHasSize: boolean;
  /** The server (and so its keepers) has CAP_SYS_RESOURCE: it may lower OOM scores. */
  canExemptFromOom: boolean;
}

/** One limit, the layers that hold it here, and what is missing when nothing does. */
export interface LayerReport {
  limit: 'processes' | 'memory' | 'memory of all sandboxes' | 'disk' | 'open files' | 'cpu' | 'OOM killer';
  heldBy: string;
  /** Set when the limit does not hold (fully) here: what a person can do about it. */
  missing?: string;
}

const CGROUP_FIX =
  'run the server as root, or on cgroup v2 give it a subtree with memory and pids delegated (systemd: Delegate=yes, e.g. systemd-run --user --scope -p Delegate=yes sandbox-mcp)';

/** The layer that holds each limit of a sandbox with the server's default settings, on a machine with `facts`. */
export function describeLayers(facts: MachineFacts, settings: LimitSettings): LayerReport[] {
  const { cgroup } = facts;
  const memoryMb = cgroup.memoryMb !== undefined ? settings.memoryMb : null;
  const reports: LayerReport[] = [
    {
      limit: 'processes',
      heldBy:
        `${settings.processes} per sandbox by RLIMIT_NPROC (counted per sandbox: each has its own user namespace)` +
        (cgroup.pidsMax !== undefined ? ' and the cgroup pids controller' : ''),
    },
    memoryMb !== null
      ? { limit: 'memory', heldBy: `${memoryMb} MB by default by the memory cgroup (files in the writable mounts included)` }
      : {
          limit: 'memory',
          heldBy: "none per sandbox: the host's OOM killer chooses sandbox commands first (oom_score_adj 500)",
          missing:
            `no memory cgroup can be made, so the memory limits configured (${settings.memoryMb} MB per sandbox, ${settings.maxTotalMemoryMb} MB together) ` +
            `are not enforced (memory_mb is null; create_sandbox with memory is unsupported): ${CGROUP_FIX}`,
        },
    {
      limit: 'memory of all sandboxes',
      heldBy:
        memoryMb === null
          ? 'none (no memory cgroup)'
          : facts.hasCeilingCgroup
            ? `${settings.maxTotalMemoryMb} MB together by their parent memory cgroup (one per state directory)`
            : `${settings.maxTotalMemoryMb} MB together by counting their memory limits: a create that would take them above it is refused`,
    },
    facts.bwrapHasSize
      ? { limit: 'disk', heldBy: `${diskBudgetMb(settings.diskMb, memoryMb)} MB by sized tmpfs mounts (bubblewrap --size)` }
      : {
          limit: 'disk',
          heldBy: memoryMb !== null ? 'the memory cgroup only (files are memory)' : 'none',
          missing: 'bubblewrap older than 0.7 cannot size tmpfs mounts (disk_size_mb is null): install bubblewrap 0.7 or later',
        },
    { limit: 'open files', heldBy: `${settings.openFiles} per process by RLIMIT_NOFILE` },
    cgroup.cpu !== undefined
      ? { limit: 'cpu', heldBy: 'the cpu cgroup, when create_sandbox asks for cpu' }
      : { limit: 'cpu', heldBy: 'none', missing: `create_sandbox with cpu is unsupported: ${CGROUP_FIX}` },
    facts.canExemptFromOom
      ? {
          limit: 'OOM killer',
          heldBy:
            "pid 1 and bwrap are outside the sandbox's cgroups and exempt from the host's OOM killer; sandbox commands are chosen first",
        }
      : {
          limit: 'OOM killer',
          heldBy:
            "pid 1 and bwrap are outside the sandbox's cgroups; sandbox commands are chosen first (oom_score_adj 500); exempting pid 1 from the host's OOM killer needs CAP_SYS_RESOURCE",
        },
  ];
  return reports;
}

/** True when this process has CAP_SYS_RESOURCE (root usually has; a container's root may not). */
export function hasSysResource(): boolean {
  try {
    const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
    return hex !== undefined && ((BigInt('0x' + hex) >> 24n) & 1n) === 1n;
  } catch {
    return false;
  }
}
