// The shell wrapper exec runs through envd. envd's own deadline signals only the process it
// started, so children of a compound command would outlive a timeout; the wrapper instead runs
// the command in a new session (its own process group) and a watchdog signals that whole group:
// TERM, then KILL once a grace period passes or as soon as the group is empty. When the command
// finishes, descendants left in its group get the same treatment (a process that starts its own
// session escapes; if it keeps the output open, envd's backstop deadline ends the call).

/** The command travels in this variable (not in argv quoting, which could quadruple its size). */
export const EXEC_COMMAND_VAR = 'SANDBOX_MCP_EXEC_COMMAND';
/** The wrapper's exit status when the watchdog fired (timeout(1)'s convention). */
export const TIMED_OUT_EXIT = 124;

/**
 * The wrapper script for a command with a `timeoutS` deadline and `graceS` seconds between TERM and
 * KILL of its process group. Pure: returns text for `bash -c`; the command comes from the environment.
 */
export function buildExecScript(timeoutS: number, graceS: number): string {
  const graceTicks = Math.max(1, Math.round(graceS * 10));
  return [
    // bash reports background jobs killed by a signal ("Killed") on its own stderr: keep the
    // wrapper's stderr quiet and give the command the real one.
    'exec 3>&2 2>/dev/null',
    `__c=$${EXEC_COMMAND_VAR}; unset ${EXEC_COMMAND_VAR}`,
    '__m=$(mktemp -u "${TMPDIR:-/tmp}/.sandbox-mcp-timeout.XXXXXXXX")',
    // A background job of a non-interactive shell is not a group leader, so setsid does not fork:
    // $! is the new session's leader and its pid is the group id. `<&0` keeps stdin (a background
    // job would otherwise read /dev/null).
    'setsid bash -c "$__c" <&0 2>&3 3>&- &',
    '__p=$!',
    'setsid bash -c \'sleep "$1"; : > "$3"; kill -TERM -- "-$2" 2>/dev/null || exit 0; ' +
      'i=0; while [ "$i" -lt "$4" ] && kill -0 -- "-$2" 2>/dev/null; do sleep 0.1; i=$((i+1)); done; ' +
      `kill -KILL -- "-$2" 2>/dev/null; exit 0' sandbox-mcp-watchdog ${timeoutS} "$__p" "$__m" ${graceTicks} </dev/null >/dev/null 2>&1 3>&- &`,
    '__w=$!',
    'wait "$__p"; __rc=$?',
    `if [ -e "$__m" ]; then wait "$__w"; rm -f "$__m"; exit ${TIMED_OUT_EXIT}; fi`,
    // By pid too: a fast command can finish before the watchdog's setsid has made its group.
    // The marker too: the watchdog may have fired between the check above and this kill.
    'kill -KILL -- "-$__w" "$__w" 2>/dev/null; rm -f "$__m"',
    // Descendants left in the group would hold the output open: clean them up like a timeout does.
    `kill -TERM -- "-$__p" 2>/dev/null && { i=0; while [ "$i" -lt ${graceTicks} ] && kill -0 -- "-$__p" 2>/dev/null; do sleep 0.1; i=$((i+1)); done; kill -KILL -- "-$__p" 2>/dev/null; }`,
    'exit "$__rc"',
  ].join('\n');
}
