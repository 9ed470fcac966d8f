// Where the agent keeps its task state (requests, statuses, logs): under the home of the user it
// runs as. Shared by the agent, which writes there, and the local provider, which gives that
// directory a small mount of its own so a sandbox that fills its home, /tmp or root still has room
// to record every command's and task's output.

/** The agent's state directory, relative to its user's home. */
export const AGENT_STATE_FROM_HOME = '.local/state/sandbox-agent';
