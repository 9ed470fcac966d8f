// Every insufficient_resources a tool can return names a way out that works in its situation,
// never only the generic "free some or ask for less". One case per place such an error is made
// (grep ProviderError('insufficient_resources' and the agent's codes in tasks/agent-client.ts);
// the advice each pins is what the situation leaves working — e.g. at the commands' process limit
// no run_command can start, so only stop_processes (which needs no room in the sandbox) helps.
import { NotEnoughSpaceError, SandboxError } from 'e2b';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { mapE2bError } from '../../host/providers/e2b/errors.js';
import { hostResourcesError, keeperFailureError, toProviderError, userProcessLimitError } from '../../host/providers/local/errors.js';
import { fileStatusError, FILE_STATUS } from '../../host/providers/local/files/scripts.js';
import { memoryCeilingReached, processLimitReached, tooManySandboxes } from '../../host/providers/local/limits/notes.js';
import { RECOVERY_SUGGESTIONS, type ProviderError } from '../../host/providers/provider-error.js';
import { agentErrorToProviderError } from '../../host/tasks/agent-client.js';
import { WaitGate } from '../../host/tasks/wait-gate.js';
import { exposeRefusal } from '../../host/providers/local/network/expose.js';
import { REPO } from '../support/paths.js';

const GENERIC = RECOVERY_SUGGESTIONS.insufficient_resources;

function errno(code: string): Error {
  return Object.assign(new Error(`raw ${code} text /host/path`), { code });
}

function thrownBy(f: () => unknown): ProviderError {
  try {
    f();
  } catch (e) {
    return e as ProviderError;
  }
  throw new Error('expected a throw');
}

/** [where, the error, advice it must carry] */
const CASES: Array<[string, ProviderError, RegExp[]]> = [
  ['live sandboxes (sandbox_limit)', tooManySandboxes(16), [/kill_sandbox/, /list_sandboxes/, /--max-sandboxes/]],
  ['memory ceiling (memory_ceiling)', memoryCeilingReached(8192, 8000), [/kill_sandbox/, /less `memory`/, /--max-total-memory/]],
  // A task refused: commands still have their share and reserve, and cancel_task's agent its.
  ['process limit, a task', processLimitReached(1024, 'task'), [/run_command with kill or pkill/, /cancel_task/, /stop_processes/]],
  // A command refused: its reserve is full too, so no run_command can help; stop_processes needs no room.
  [
    'process limit, a command',
    processLimitReached(1024, 'command'),
    [/^(?:(?!run_command with).)*$/, /call stop_processes/, /needs no room/],
  ],
  // The server's own helper refused (get_task, cancel_task, a file operation): only what needs no process in the sandbox.
  ['process limit, the server', processLimitReached(1024, 'service'), [/^(?:(?!run_command|cancel_task).)*$/, /call stop_processes/]],
  [
    'waiting get_task calls (wait_limit)',
    thrownBy(() => {
      const gate = new WaitGate(1);
      gate.enter('local:a');
      gate.enter('local:a');
    }),
    [/wait 0/, /once another returns/],
  ],
  ['a write into a full mount (ENOSPC)', fileStatusError(FILE_STATUS.noSpace)!, [/run_command with rm/, /--sandbox-disk/]],
  // Exposed ports stay until the sandbox ends; the URL of one already exposed is given again.
  ['exposed ports (too_many_ports)', exposeRefusal('too_many_ports'), [/serve on a port already exposed/, /another sandbox/]],
  [
    'the agent: 128 task directories (task_limit)',
    agentOf('task_limit', 'agent/ops/start.ts'),
    [/rm -r ~\/\.local\/state\/sandbox-agent\/tasks\/<task_id>/, /another sandbox/],
  ],
  ["the agent: its state directory's disk full (state_dir_full)", agentOf('state_dir_full', 'agent/no-space.ts'), [/run_command with rm/]],
  ["the server's state directory's disk full", toProviderError(errno('ENOSPC')), [/free space there/, /SANDBOX_MCP_STATE_DIR/]],
  ['the server out of open files', toProviderError(errno('EMFILE')), [/ulimit -n/, /LimitNOFILE/]],
  ['the machine out of processes or memory', toProviderError(errno('EAGAIN')), [/kill_sandbox/, /stop_processes/]],
  ['a command whose nsenter could not start', hostResourcesError('ENOMEM'), [/kill_sandbox/, /end other programs/]],
  // A create near the server's user's process limit, however the start broke (lifecycle/create.ts).
  [
    "the server's user at its process limit (user_process_limit)",
    userProcessLimitError({ uid: 1000, limit: 4096, used: 4090 }),
    [/uid 1000/, /4090 of 4096/, /kill_sandbox/, /stop_processes/, /ulimit -u/, /LimitNPROC=/],
  ],
  [
    'bwrap out of processes or memory (start_out_of_resources)',
    keeperFailureError('start_out_of_resources'),
    [/kill_sandbox/, /end other programs/],
  ],
  ['e2b: the sandbox disk full', mapE2bError(new NotEnoughSpaceError('raw')), [/run_command with rm/, /larger disk/]],
  ['e2b: 507 from envd', mapE2bError(Object.assign(new SandboxError('507: raw'), { statusCode: 507 })), [/run_command with rm/]],
];

/** The agent's own message for `code`, read from its source (the agent bundles it; the host shows it as is). */
function agentOf(code: 'task_limit' | 'state_dir_full', file: string): ProviderError {
  const text = readSource(file);
  const m = new RegExp(`'${code}',\\s*((?:\`[^\`]*\`|'[^']*')(?:\\s*\\+\\s*(?:\`[^\`]*\`|'[^']*'))*)`).exec(text);
  if (!m) throw new Error(`no ${code} message in ${file}`);
  const message = m[1]!
    .split(/\s*\+\s*/)
    .map((part) => part.slice(1, -1))
    .join('')
    .replace(/\$\{LIMITS\.maxTasks\}/g, '128');
  return agentErrorToProviderError(code, message);
}

function readSource(file: string): string {
  return readFileSync(join(REPO, file), 'utf8');
}

describe('insufficient_resources advice', () => {
  it.each(CASES)('%s: names a way out that works there', (_where, error, advice) => {
    expect(error.category).toBe('insufficient_resources');
    expect(error.suggestion).not.toBe(GENERIC);
    for (const re of advice) expect(error.suggestion).toMatch(re);
    // Static text of ours: no host path or raw system text.
    expect(error.suggestion).not.toMatch(/raw|\/host\/path/);
  });

  it('covers every place an insufficient_resources is made', () => {
    const places = [
      'host/providers/local/limits/notes.ts',
      'host/providers/local/files/scripts.ts',
      'host/providers/local/network/expose.ts',
      'host/providers/local/exec/terminal.ts',
      'host/providers/local/errors.ts',
      'host/tasks/wait-gate.ts',
    ];
    // The pseudo-terminal of the operator's shell (no tool): its advice is pinned here by its text.
    expect(readSource('host/providers/local/exec/terminal.ts')).toMatch(
      /code: 'pty_spawn_failed',\s*detail:\s*'[^']*close other terminals/,
    );
    const count = (file: string) => (readSource(file).match(/new ProviderError\('insufficient_resources'/g) ?? []).length;
    // notes.ts: sandboxes, memory ceiling, process limit; errors.ts: the user's process limit,
    // hostResourcesError, bwrap out of resources; one each elsewhere.
    expect(Object.fromEntries(places.map((f) => [f, count(f)]))).toEqual({
      'host/providers/local/limits/notes.ts': 3,
      'host/providers/local/files/scripts.ts': 1,
      'host/providers/local/network/expose.ts': 1,
      'host/providers/local/exec/terminal.ts': 1,
      'host/providers/local/errors.ts': 3,
      'host/tasks/wait-gate.ts': 1,
    });
    // Each of those with a detail of its own (the generic suggestion is never what they say).
    for (const f of places) {
      for (const m of readSource(f).matchAll(/new ProviderError\('insufficient_resources', \{([^}]*)/g)) expect(m[1], f).toMatch(/detail/);
    }
  });
});
