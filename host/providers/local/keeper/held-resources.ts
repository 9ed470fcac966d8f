// What the keeper holds for its sandbox's lifetime and gives back when the sandbox ends: its
// cgroups, and its network services (egress proxy, exposed ports, control socket). The keeper releases
// them after the sandbox's processes are gone, on every way it ends that it survives; a keeper
// killed -9 leaves them to the provider's sweep (see sandbox/sweep.ts).
import { removeCgroups, removeCgroupsNow, removeEmptyCeilings } from '../system/cgroups.js';

/** One thing the keeper must give back when its sandbox ends. */
export interface HeldResource {
  /** Gives it back once the sandbox's processes are gone; never rejects. */
  release(): Promise<void>;
  /** A last try without waiting, from the keeper's 'exit' handler; never throws. */
  releaseNow(): void;
}

/** The resources the keeper holds, given back in the reverse order of taking, each exactly once. */
export class HeldResources {
  private readonly held: HeldResource[] = [];

  /** Takes `resource` into the keeper's care until the sandbox ends. */
  hold(resource: HeldResource): void {
    this.held.push(resource);
  }

  /** Releases everything still held, newest first. */
  async releaseAll(): Promise<void> {
    for (let r = this.held.pop(); r !== undefined; r = this.held.pop()) await r.release();
  }

  /** Releases what can be released synchronously (the process is exiting); forgets everything. */
  releaseAllNow(): void {
    for (let r = this.held.pop(); r !== undefined; r = this.held.pop()) r.releaseNow();
  }
}

/**
 * The sandbox's cgroup directories as a held resource (removable once their processes are gone),
 * and the state directory's memory ceiling above them once no sandbox is left below it.
 */
export function heldCgroups(dirs: readonly string[]): HeldResource {
  return {
    release: async () => {
      await removeCgroups(dirs);
      removeEmptyCeilings(dirs);
    },
    releaseNow: () => {
      removeCgroupsNow(dirs);
      removeEmptyCeilings(dirs);
    },
  };
}
