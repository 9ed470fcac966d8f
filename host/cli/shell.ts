// `sandbox-mcp shell`: an interactive terminal inside a sandbox. The provider opens a fresh
// pseudo-terminal for the program (the person's own terminal is never handed in: a sandboxed
// process holding it could inject keystrokes with TIOCSTI); this side only relays bytes, puts the
// person's terminal in raw mode — restored on every way out — and passes on window-size changes.
import { noTerminal } from '../providers/provider.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';

/** The person's terminal, as the shell command uses it (process.stdin/stdout in the CLI). */
export interface ShellIo {
  stdin: NodeJS.ReadStream;
  stdout: NodeJS.WriteStream;
  env: NodeJS.ProcessEnv;
  /** Registers what must run however the process ends (process.on('exit')); returns its removal. */
  onProcessExit(fn: () => void): () => void;
  /** Registers the signals that end the session (SIGTERM, SIGHUP, SIGINT from outside); returns their removal. */
  onTerminatingSignal(fn: () => void): () => void;
}

const DEFAULT_SIZE = { cols: 80, rows: 24 };

/** Ctrl-D: end of input, to a program reading a terminal. */
const END_OF_INPUT = Buffer.from([4]);

/** Once input has ended, how long the program's output must pause before Ctrl-D is sent again. */
export const END_OF_INPUT_REPEAT_QUIET_MS = 250;

/**
 * End of input for a terminal whose input came from a file or pipe that ended. A pipe answers
 * every read after its end with end-of-file; a terminal gives one per Ctrl-D, and a Ctrl-D sent
 * before the program reads can be lost (an interactive shell that switches the terminal to raw
 * mode as it starts turns a pending one into a NUL byte), leaving it at a prompt forever. So after
 * the end Ctrl-D goes once, then again each time the program's output pauses — it printed a
 * prompt and waits — until the session ends.
 */
function endOfInputRepeater(send: () => void, quietMs: number) {
  let hasEnded = false;
  let timer: NodeJS.Timeout | undefined;
  return {
    inputEnded(): void {
      hasEnded = true;
      send();
    },
    output(): void {
      if (!hasEnded) return;
      clearTimeout(timer);
      timer = setTimeout(send, quietMs);
    },
    stop(): void {
      clearTimeout(timer);
    },
  };
}

function sizeOf(stdout: NodeJS.WriteStream): { cols: number; rows: number } {
  return stdout.isTTY && stdout.columns > 0 && stdout.rows > 0 ? { cols: stdout.columns, rows: stdout.rows } : DEFAULT_SIZE;
}

/** Runs the terminal session to its end; returns the program's exit status (128+signal if killed). */
export async function runShell(
  deps: Pick<ServerDeps, 'providers'>,
  sandbox: SandboxRef,
  command: readonly string[],
  io: ShellIo,
): Promise<number> {
  const provider = deps.providers.get(sandbox.provider);
  if (!provider.openTerminal) throw noTerminal();
  const { stdin, stdout } = io;
  const endOfInput = endOfInputRepeater(() => session.write(END_OF_INPUT), END_OF_INPUT_REPEAT_QUIET_MS);
  const session = await provider.openTerminal(sandbox.id, {
    ...sizeOf(stdout),
    ...(command.length > 0 ? { command } : {}),
    term: io.env.TERM || 'xterm-256color',
    onData: (data) => {
      stdout.write(data);
      endOfInput.output();
    },
  });

  // Raw mode: every key (Ctrl-C and Ctrl-Z included) goes to the program inside, none to this process.
  const isRaw = stdin.isTTY === true;
  const restore = () => {
    if (isRaw && stdin.isRaw) stdin.setRawMode(false);
  };
  const removeExitHook = io.onProcessExit(restore);
  if (isRaw) stdin.setRawMode(true);
  const onInput = (data: Buffer) => session.write(data);
  // Input from a file or pipe that ends is the end of input for the program (< /dev/null included).
  const onEnd = () => endOfInput.inputEnded();
  const onResize = () => session.resize(sizeOf(stdout).cols, sizeOf(stdout).rows);
  stdin.on('data', onInput);
  stdin.on('end', onEnd);
  stdin.resume();
  stdout.on('resize', onResize);
  const removeSignals = io.onTerminatingSignal(() => session.kill());
  try {
    return await session.exited;
  } finally {
    endOfInput.stop();
    removeSignals();
    stdout.off('resize', onResize);
    stdin.off('data', onInput);
    stdin.off('end', onEnd);
    stdin.pause();
    restore();
    removeExitHook();
  }
}
