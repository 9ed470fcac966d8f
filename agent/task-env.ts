// The command's environment: the one `start` ran with, with task variables (TASK_ENV_PREFIX +
// NAME, put there by the host for this task only) moved to their own names. They travel this way
// so that their values are never on a command line or in the task directory, and so that a task
// variable such as PATH or NODE_OPTIONS changes the command, never the agent or its supervisor.
import { AGENT_COMPILE_CACHE_VAR } from '../shared/agent-runtime.js';
import { TASK_ENV_PREFIX } from '../shared/protocol.js';

/** The agent's own environment as the base of a command's (commandEnv of it, the agent's compile cache left out). */
export function agentBaseEnv(): NodeJS.ProcessEnv {
  const env = commandEnv(process.env);
  delete env[AGENT_COMPILE_CACHE_VAR];
  return env;
}

/** `env` with every TASK_ENV_PREFIX variable renamed to the name after the prefix (overriding one already there). */
export function commandEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  const task: [string, string | undefined][] = [];
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith(TASK_ENV_PREFIX) && name.length > TASK_ENV_PREFIX.length) task.push([name.slice(TASK_ENV_PREFIX.length), value]);
    else out[name] = value;
  }
  for (const [name, value] of task) out[name] = value;
  return out;
}
