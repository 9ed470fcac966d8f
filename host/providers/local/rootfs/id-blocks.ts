// Host ids of template sandboxes on a root server: each gets a block of 65536 of its own (its uid
// and gid 0-65535 inside, so packages may own files as _apt or man), never shared with another
// sandbox — sharing one, a sandbox holding every inotify instance left none to the other (measured:
// per-user counters are host-wide). Blocks are claimed machine-wide, whatever the state directory:
// a claim is a file `<k>` under CLAIMS_DIR, made with O_EXCL, naming the sandbox directory it is for;
// it is given back when that directory is removed (state-dir.ts), and one whose directory is gone
// (a keeper killed -9, then its state directory deleted) may be taken over.
import { randomBytes } from 'node:crypto';
import { existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SANDBOX_UID_BASE, SANDBOX_UID_COUNT } from '../sandbox/ids.js';

/** Ids per block: a full 16-bit range, as container images expect. */
export const ID_BLOCK_SIZE = 65_536;

/**
 * The first block starts right above the uids of base sandboxes; the last ends below systemd's
 * "foreign" range (0x7FFE0000), so every id stays below 2^31 (spawn's limit).
 */
export const ID_BLOCK_BASE = SANDBOX_UID_BASE + SANDBOX_UID_COUNT;
export const ID_BLOCK_COUNT = Math.floor((0x7ffe_0000 - ID_BLOCK_BASE) / ID_BLOCK_SIZE);

/** Where a root server's claims live: a tmpfs, so a reboot (which ends every sandbox) forgets them. */
export const ID_BLOCK_CLAIMS_DIR = '/run/sandbox-mcp/id-blocks';

/** The claims directory, made private to root; throws when it is not (others could forge claims). */
function claimsDir(dir: string): string {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory() || st.uid !== (process.geteuid?.() ?? 0) || (st.mode & 0o022) !== 0) {
    throw Object.assign(new Error('claims directory not private'), { code: 'EPERM' });
  }
  return dir;
}

function readClaim(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** Takes over claim `file` if the sandbox directory it names is gone; true when it was removed. */
function removeIfStale(file: string): boolean {
  const owner = readClaim(file);
  if (owner === null || existsSync(owner)) return false;
  const aside = `${file}.stale-${randomBytes(4).toString('hex')}`;
  try {
    renameSync(file, aside);
  } catch {
    return false;
  }
  // Between our read and the rename someone may have taken the block over and claimed it anew:
  // that claim is theirs, put it back.
  if (readClaim(aside) !== owner) {
    try {
      linkSync(aside, file);
    } catch {
      // A third claimant got in between; nothing more can be done here without a lock.
    }
    unlinkSync(aside);
    return false;
  }
  unlinkSync(aside);
  return true;
}

/**
 * Claims a free block for the sandbox directory `sandboxDir` and returns its first host id. Throws
 * an Error with code `ENOSPC` when every block (the first `count`) is taken by a live sandbox.
 */
export function claimIdBlock(sandboxDir: string, dir = ID_BLOCK_CLAIMS_DIR, count = ID_BLOCK_COUNT): number {
  const claims = claimsDir(dir);
  const taken = new Set(readdirSync(claims));
  const order = shuffled(Math.min(count, ID_BLOCK_COUNT));
  const tryClaim = (k: number): boolean => {
    try {
      writeFileSync(join(claims, String(k)), sandboxDir, { flag: 'wx', mode: 0o600 });
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
  };
  for (const k of order) if (!taken.has(String(k)) && tryClaim(k)) return ID_BLOCK_BASE + k * ID_BLOCK_SIZE;
  for (const k of order) if (removeIfStale(join(claims, String(k))) && tryClaim(k)) return ID_BLOCK_BASE + k * ID_BLOCK_SIZE;
  throw Object.assign(new Error('no free id block'), { code: 'ENOSPC' });
}

/** Gives back the block starting at `firstId` if `sandboxDir` still holds it; never throws. */
export function releaseIdBlock(firstId: number, sandboxDir: string, dir = ID_BLOCK_CLAIMS_DIR): void {
  const k = (firstId - ID_BLOCK_BASE) / ID_BLOCK_SIZE;
  if (!Number.isInteger(k) || k < 0 || k >= ID_BLOCK_COUNT) return;
  const file = join(dir, String(k));
  try {
    if (readClaim(file) === sandboxDir) unlinkSync(file);
  } catch {
    // Gone already.
  }
}

/** 0…n-1 in a random order (a random start and stride would do, but this is cheap at n ≈ 4000). */
function shuffled(n: number): number[] {
  const a = Array.from({ length: n }, (_, i) => i);
  const r = randomBytes(n * 4);
  for (let i = n - 1; i > 0; i--) {
    const j = r.readUInt32LE(i * 4) % (i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
