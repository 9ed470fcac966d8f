// Names a sandbox gets at create: its id (the name of its state directory and of its cgroups)
// and, on a root server, a host uid of its own. Pure apart from the random bytes.
import { randomBytes } from 'node:crypto';

const ID_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const ID_LENGTH = 12;
const ID_PATTERN = /^[a-z0-9]{12}$/;

/** A fresh sandbox id: 12 random characters of [a-z0-9] (about 62 bits). */
export function newSandboxId(): string {
  const bytes = randomBytes(ID_LENGTH * 2);
  let id = '';
  // Rejection sampling keeps the distribution uniform (252 = 7 * 36).
  for (const b of bytes) {
    if (b < 252) id += ID_ALPHABET[b % 36];
    if (id.length === ID_LENGTH) return id;
  }
  return id + newSandboxId().slice(0, ID_LENGTH - id.length);
}

/**
 * Host uids given to sandboxes of a root server, one per sandbox: a range systemd leaves
 * unassigned (above its container range 0x00080000–0x6FFFFFFF, below its "foreign" range
 * 0x7FFE0000), and below 2^31 (spawn's limit). A uid of its own means no other sandbox and no
 * host daemon (e.g. one running as nobody) shares its kernel identity: none can signal, ptrace
 * or enter it, and host-owned files never appear as the sandbox user's own.
 */
export const SANDBOX_UID_BASE = 0x7000_0000;
export const SANDBOX_UID_COUNT = 0x0100_0000;

/** A random uid of the sandbox range not in `taken` (the uids of live sandboxes). */
export function newSandboxUid(taken: ReadonlySet<number>): number {
  for (;;) {
    const uid = SANDBOX_UID_BASE + (randomBytes(4).readUInt32BE(0) % SANDBOX_UID_COUNT);
    if (!taken.has(uid)) return uid;
  }
}

/** True for a string shaped like one of our ids (anything else can never name a sandbox). */
export function isSandboxId(id: string): boolean {
  return ID_PATTERN.test(id);
}
