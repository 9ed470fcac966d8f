// What the keeper enforces for its sandbox, recorded in keeper.json once the sandbox is ready:
// get_sandbox reports it (cpu_count, memory_mb, disk_size_mb), whatever create asked for.

/** The limits that hold for one sandbox, by the layer that holds them; null where none does. */
export interface EnforcedLimits {
  /** CPUs (cgroup cpu quota). */
  cpu: number | null;
  /** Memory limit in MiB (memory cgroup), files in the writable mounts included. */
  memoryMb: number | null;
  /** pids.max of the sandbox's cgroup (the rlimits hold without one). */
  pidsMax: number | null;
  /** The writable mounts' sizes together, in MiB (sized tmpfs; bubblewrap 0.7+). */
  diskMb: number | null;
  /** pid 1 and bwrap are exempt from the OOM killer (only a keeper running as root can do that). */
  oomExempt: boolean;
  /** The memory ceiling of all sandboxes of the state directory in MiB, held by this sandbox's parent cgroup; null without one. Absent in records before it. */
  totalMemoryMb?: number | null;
  /** SysV shared memory's bound in MiB, segments removed with their processes (limits/ipc-bounds.ts; root only). Absent in records before it. */
  sysvShmMb?: number | null;
}
