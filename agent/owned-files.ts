// The files a task the resident runs (owned-command.ts) keeps beside TASK_FILES, shared with the
// supervisor that adopts it and with `cancel`.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeFileQuietly } from './remove-file.js';
import type { MaskerState } from './secret-masker.js';

/** File names inside such a task's directory. */
export const OWNED_FILES = {
  /** What each log's masker held back when last saved (see MaskerState); absent when nothing. */
  held: ['.held-stdout', '.held-stderr'],
  /** Made by a `cancel` from another process: whoever records the outcome calls it cancelled. */
  cancelRequest: 'cancel.request',
} as const;

/** The saved hold of log `i` (0 stdout, 1 stderr) in `dir`, if any. */
export function readHeld(dir: string, i: number): MaskerState | undefined {
  try {
    const record = JSON.parse(readFileSync(join(dir, OWNED_FILES.held[i]!), 'utf8')) as { pending_b64?: unknown; covered?: unknown };
    if (typeof record.pending_b64 !== 'string' || typeof record.covered !== 'number') return undefined;
    return { pending: Buffer.from(record.pending_b64, 'base64'), covered: record.covered };
  } catch {
    return undefined;
  }
}

/** Saves the hold of log `i`; removes the file when nothing is held. Best effort (a full disk keeps the last one). */
export function writeHeld(dir: string, i: number, state: MaskerState): void {
  const path = join(dir, OWNED_FILES.held[i]!);
  if (!state.pending || state.pending.length === 0) {
    removeFileQuietly(path);
    return;
  }
  try {
    writeFileSync(path, JSON.stringify({ pending_b64: state.pending.toString('base64'), covered: state.covered }), { mode: 0o600 });
  } catch {
    // the adopter finds the previous hold, or none: at most a secret's length of this stream is at stake
  }
}

/** True when a cancel from another process was asked for (see OWNED_FILES.cancelRequest). */
export function hasCancelRequest(dir: string): boolean {
  try {
    readFileSync(join(dir, OWNED_FILES.cancelRequest));
    return true;
  } catch {
    return false;
  }
}

/** Asks whoever records a task's outcome to call it cancelled (a cancel from another process than its owner). */
export function markCancelRequested(dir: string): void {
  const tmp = join(dir, `.${OWNED_FILES.cancelRequest}.${process.pid}`);
  try {
    writeFileSync(tmp, '', { mode: 0o600 });
    renameSync(tmp, join(dir, OWNED_FILES.cancelRequest));
  } catch {
    removeFileQuietly(tmp);
  }
}
