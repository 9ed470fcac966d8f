// What the initialize result tells a model about this server: how to work with it, and what its
// configuration makes true (what becomes of its sandboxes, their network).
import type { ServerConfig } from '../config/config.js';
import { SANDBOX_LIFETIME_DEFAULT_S } from '../providers/provider.js';
import { networkSummary } from './tools/network.js';
import { workspaceSummary } from './tools/workspace.js';

/** What becomes of the sandboxes a session creates, as the instructions tell it (see --keep-sandboxes). */
const SESSION_END = {
  destroyed: 'sandboxes you create are destroyed when this session ends, unless you started a task in them',
  kept: 'sandboxes you create outlive this session until their timeout: destroy them with kill_sandbox when done',
};

/**
 * What the initialize result tells a model: the workflow (what becomes of its sandboxes follows
 * `keepSandboxes`, the server option), then the network its sandboxes have and the workspaces offered.
 */
export function instructionsFor(config: Pick<ServerConfig, 'keepSandboxes' | 'localNetwork' | 'network' | 'workspaceAllow'>): string {
  const keepSandboxes = config.keepSandboxes === true;
  return [
    'sandbox-mcp gives you Linux sandboxes. Workflow:',
    `1. create_sandbox (it becomes your default; ${keepSandboxes ? SESSION_END.kept : SESSION_END.destroyed}).`,
    `   A sandbox lives \`timeout\` seconds (default ${SANDBOX_LIFETIME_DEFAULT_S}) and tasks never extend it: for long tasks create it with a longer timeout or call set_sandbox_timeout.`,
    '2. run_command / run_code for synchronous work; files with read_file, write_file, list_files, upload_file, download_file.',
    '   Clients often cut a call at about 60 s: when a command might take longer (installs, builds, tests), pass background_after (e.g. 50).',
    '   If it is still running then, the result has backgrounded: true and a task_id: continue with get_task as for start_task.',
    '3. For long work, start_task and SAVE both sandbox_id and task_id: they keep working across disconnects and server restarts.',
    '4. Read output with get_task, passing the returned stdout_next_offset / stderr_next_offset each time; use wait (up to 30 s) instead of polling in a loop.',
    '   A task waiting at a prompt (installer question, REPL) shows it in its output: answer with send_task_input (eof: true closes its stdin).',
    '5. cancel_task stops a task; stop_processes ends whatever commands left running (e.g. `cmd &`) and keeps the tasks; when finished, destroy retained sandboxes with kill_sandbox.',
    'Long calls report notifications/progress every ~10 s when you send a progressToken.',
    networkSummary(config),
    ...((config.workspaceAllow ?? []).length > 0
      ? [
          `${workspaceSummary(config)} A sandbox created with one works on a copy-on-write view of it (workspace_changes lists your changes; only the person applies them to the host).`,
        ]
      : []),
  ].join('\n');
}
