// Interactive terminals on a connected sandbox, through the SDK's pty API: envd makes the
// pseudo-terminal inside the sandbox and runs its shell there, so nothing of the caller's own
// terminal is handed in. Failures of pty.create are the SDK's own errors, unmapped (the provider
// maps them); once open, the session never throws: a broken stream ends it.
import { CommandExitError, type CommandHandle, type Sandbox } from 'e2b';
import { ProviderError } from '../provider-error.js';
import type { TerminalOpts, TerminalSession } from '../provider.js';

/** The exit status reported when the terminal's stream broke and its program's status is unknown (as ssh reports a lost connection). */
export const TERMINAL_LOST_EXIT = 255;

async function exitOf(handle: CommandHandle): Promise<number> {
  try {
    return (await handle.wait()).exitCode;
  } catch (e) {
    if (e instanceof CommandExitError && e.exitCode >= 0) return e.exitCode;
    return TERMINAL_LOST_EXIT;
  }
}

/** Opens E2B's interactive login shell (`bash -i -l`, the SDK's only pty program) with no deadline. */
export async function openTerminal(sandbox: Sandbox, opts: TerminalOpts): Promise<TerminalSession> {
  if (opts.command && opts.command.length > 0) {
    throw new ProviderError('unsupported', {
      code: 'terminal_command',
      detail: "E2B's terminal API runs only an interactive shell: start the program from that shell, or use run_command.",
    });
  }
  const handle = await sandbox.pty.create({
    cols: opts.cols,
    rows: opts.rows,
    envs: { TERM: opts.term ?? 'xterm-256color' },
    // 0: no deadline; the SDK's default would end an interactive session after 60 s.
    timeoutMs: 0,
    onData: (data) => opts.onData(Buffer.from(data)),
  });
  const pid = handle.pid;
  // One request per keystroke batch, strictly in order: concurrent requests could reorder input.
  let queue: Promise<unknown> = Promise.resolve();
  const enqueue = (call: () => Promise<unknown>) => {
    queue = queue.then(call).catch(() => undefined);
  };
  return {
    write: (data) => enqueue(() => sandbox.pty.sendInput(pid, new Uint8Array(data))),
    resize: (cols, rows) => enqueue(() => sandbox.pty.resize(pid, { cols, rows })),
    kill: () => enqueue(() => sandbox.pty.kill(pid)),
    exited: exitOf(handle),
  };
}
