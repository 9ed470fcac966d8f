// The shell wrapper exec runs through envd. envd's own deadline signals only the process it
// started, so children of a compound command would outlive a timeout; the wrapper instead runs
// the command in a new session (its own process group) and a watchdog signals that whole group:
// TERM, then KILL once a grace period passes or as soon as the group has no live process (zombies
// do not count: an init that reaps lazily would stretch every kill to the full grace period; /proc
// is read directly, procps may be absent). When the command finishes, descendants left in its
// group get the same treatment (a process that starts its own session escapes; if it keeps the
// output open, envd's backstop deadline ends the call).
// A cancelled call sends the wrapper itself SIGTERM (CANCEL_SIGNAL): its trap gives the group the
// same TERM-then-KILL, and the wrapper exits with the command's own status (128+signal).

/** The command travels in this variable (not in argv quoting, which could quadruple its size). */
export const EXEC_COMMAND_VAR = 'SANDBOX_MCP_EXEC_COMMAND';
/** The wrapper's exit status when the watchdog fired (timeout(1)'s convention). */
export const TIMED_OUT_EXIT = 124;
/** Sent to the wrapper's pid to cancel the command (its trap signals the command's group). */
export const CANCEL_SIGNAL = 'TERM';

/**
 * The wrapper script for a command with a `timeoutS` deadline and `graceS` seconds between TERM and
 * KILL of its process group. Pure: returns text for `bash -c`; the command comes from the environment.
 */
export function buildExecScript(timeoutS: number, graceS: number): string {
  const graceTicks = Math.max(1, Math.round(graceS * 10));
  // Shared by the wrapper and the watchdog (whose script is single-quoted: no single quotes here).
  // __g PGID: true while a non-zombie process is in the group. __k PGID: TERM, wait, KILL.
  const groupFns =
    '__g() { local f l g=$1; for f in /proc/[0-9]*/stat; do { read -r l < "$f"; } 2>/dev/null || continue; ' +
    'l=${l##*") "}; set -- $l; [ "$3" = "$g" ] && [ "$1" != Z ] && return 0; done; return 1; }; ' +
    `__k() { kill -TERM -- "-$1" 2>/dev/null || return 0; local i=0; while [ "$i" -lt ${graceTicks} ] && __g "$1"; do sleep 0.1; i=$((i+1)); done; ` +
    'kill -KILL -- "-$1" 2>/dev/null; return 0; }';
  return [
    // bash reports background jobs killed by a signal ("Killed") on its own stderr: keep the
    // wrapper's stderr quiet and give the command the real one.
    'exec 3>&2 2>/dev/null',
    `__c=$${EXEC_COMMAND_VAR}; unset ${EXEC_COMMAND_VAR}`,
    '__m=$(mktemp -u "${TMPDIR:-/tmp}/.sandbox-mcp-timeout.XXXXXXXX")',
    groupFns,
    // Cancellation may arrive before the command's group exists: the trap then only records it,
    // and the check after `__p=$!` acts on it (one of the two always sees both __x and __p).
    '__p=; __x=',
    `trap '__x=1; [ -n "$__p" ] && __k "$__p"' ${CANCEL_SIGNAL}`,
    // A background job of a non-interactive shell is not a group leader, so setsid does not fork:
    // $! is the new session's leader and its pid is the group id. `<&0` keeps stdin (a background
    // job would otherwise read /dev/null).
    'setsid bash -c "$__c" <&0 2>&3 3>&- &',
    '__p=$!',
    '[ -n "$__x" ] && __k "$__p"',
    `setsid bash -c '${groupFns}; sleep "$1"; : > "$3"; __k "$2"; exit 0' sandbox-mcp-watchdog ${timeoutS} "$__p" "$__m" </dev/null >/dev/null 2>&1 3>&- &`,
    '__w=$!',
    // A trapped signal interrupts wait (status 128+n); once the trap has run, wait again for the
    // command's own status.
    'wait "$__p"; __rc=$?',
    '[ -n "$__x" ] && { wait "$__p"; __rc=$?; }',
    `if [ -e "$__m" ]; then wait "$__w"; rm -f "$__m"; exit ${TIMED_OUT_EXIT}; fi`,
    // By pid too: a fast command can finish before the watchdog's setsid has made its group.
    // The marker too: the watchdog may have fired between the check above and this kill.
    'kill -KILL -- "-$__w" "$__w" 2>/dev/null; rm -f "$__m"',
    // Descendants left in the group would hold the output open: clean them up like a timeout does.
    '__k "$__p"',
    'exit "$__rc"',
  ].join('\n');
}
