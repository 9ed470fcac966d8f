// The shell that runs a command for the resident agent and keeps it safe whatever happens to the
// agent. The resident cannot be the command's parent (a task must survive the resident), and a
// supervisor that takes the command over later cannot reap it either (it is not the parent). So
// the resident starts this wrapper (bash), which starts the command as a job in a process group
// of its own (`set -m`: group signals for a timeout or a cancel never reach the wrapper), reports
// its pid and its exit status on fd 3, a socket to the resident, and holds what no owner may drop:
// a spare write end of the command's stdin FIFO (fd 6), so that the command sees end-of-file only
// when `input` asks for it (SIGUSR2 to the wrapper closes it), never because an owner went away.
// Beside the command runs a watcher (a coprocess, in a group of its own too) holding spare read
// ends of the output FIFOs (fds 4, 5): while nobody reads, a writer blocks on a full pipe instead
// of dying of SIGPIPE, and no buffered byte is discarded. The watcher waits for the resident's
// word on fd 3: `release` (it saw the command through: the watcher exits) or end-of-file (it let
// go, or it died: the kernel closes its end either way). Then the watcher becomes the supervisor
// that adopts the task (`supervise --adopt`, agent/supervisor.ts), with the output read ends as
// its fds 3 and 4 and the wrapper's lines `pid N` and `exit N` on its stdin. The resident closes
// fd 3 only after it stopped reading: one reader at a time, so every byte is read once, in order.
// The wrapper waits for the command with a plain `wait` (it returns a job's status even after
// bash has reaped it), then for the watcher or its adopter, and exits with it.
import { childProcess } from './node-modules.js';

/**
 * The wrapper script. Positional parameters: $1 the command (bash -c text), $2 the shell text that
 * execs the adopter. Descriptors: 0 the command's stdin, 1 and 2 the write ends of its output
 * FIFOs, 3 the socket to the resident, 4 and 5 read ends of the output FIFOs, 6 a write end of the
 * stdin FIFO (or nothing). `bounds` (shell text ending in `; `) runs first in the job: its rlimits
 * and OOM score. The job's stderr is the real one; bash's own job reports go to /dev/null.
 */
export function wrapperScript(bounds: string): string {
  return [
    'exec 7>&2 2>/dev/null',
    '__adopter=$2',
    "trap 'exec 6>&-' USR2",
    "trap ':' TERM INT HUP",
    "trap '' PIPE",
    'set -m',
    `{ exec 3>&- 4<&- 5<&- 6>&-; ${bounds}eval "set --; $1"; } <&0 2>&7 7>&- &`,
    '__j=$!',
    'exec 0</dev/null 1>/dev/null 7>&-',
    'coproc __W { exec 6>&-; IFS= read -r __l <&3; [ "$__l" = release ] && exit 0; exec 3<&4 4<&5 5<&- 1>/dev/null; eval "$__adopter"; }',
    '__wp=$__W_PID',
    '__wf=${__W[1]}',
    'exec 4<&- 5<&-',
    'echo "pid $__j" >&3',
    'echo "pid $__j" >&"$__wf"',
    // A trapped signal (USR2, TERM) interrupts wait: wait again while the job lives.
    'while :; do wait "$__j"; kill -0 "$__j" 2>/dev/null || break; done',
    'wait "$__j"',
    '__rc=$?',
    'echo "exit $__rc" >&3',
    'echo "exit $__rc" >&"$__wf"',
    'wait "$__wp"',
  ].join('\n');
}

/** The wrapper's interpreter: bash, found once. */
export const WRAPPER_SHELL = '/bin/bash';

/** Quotes `text` for a POSIX shell. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/**
 * True when this sandbox's bash can run the wrapper (4 or later, for `coproc`). Checked once by
 * the resident at start-up: one process start.
 */
export function isPromotionCapable(): boolean {
  try {
    const out = childProcess()
      .execFileSync(WRAPPER_SHELL, ['-c', 'echo "${BASH_VERSINFO[0]} ${BASH_VERSINFO[1]}"'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        timeout: 10_000,
      })
      .trim()
      .split(' ')
      .map(Number);
    const [major = 0, minor = 0] = out;
    return major > 4 || (major === 4 && minor >= 0);
  } catch {
    return false;
  }
}
