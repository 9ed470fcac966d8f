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
  const session = await provider.openTerminal(sandbox.id, {
    ...sizeOf(stdout),
    ...(command.length > 0 ? { command } : {}),
    term: io.env.TERM || 'xterm-256color',
    onData: (data) => stdout.write(data),
  });

  // Raw mode: every key (Ctrl-C and Ctrl-Z included) goes to the program inside, none to this process.
  const isRaw = stdin.isTTY === true;
  const restore = () => {
    if (isRaw && stdin.isRaw) stdin.setRawMode(false);
  };
  const removeExitHook = io.onProcessExit(restore);
  if (isRaw) stdin.setRawMode(true);
  const onInput = (data: Buffer) => session.write(data);
  // Piped input that ends is the end of input for the program: Ctrl-D, as on a terminal.
  const onEnd = () => session.write(Buffer.from([4]));
  const onResize = () => session.resize(sizeOf(stdout).cols, sizeOf(stdout).rows);
  stdin.on('data', onInput);
  stdin.on('end', onEnd);
  stdin.resume();
  stdout.on('resize', onResize);
  const removeSignals = io.onTerminatingSignal(() => session.kill());
  try {
    return await session.exited;
  } finally {
    removeSignals();
    stdout.off('resize', onResize);
    stdin.off('data', onInput);
    stdin.off('end', onEnd);
    stdin.pause();
    restore();
    removeExitHook();
  }
}
