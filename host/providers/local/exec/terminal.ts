// Interactive terminals in local sandboxes: node-pty makes a fresh pseudo-terminal on the host and
// spawns the enter command (launch/terminal-command.ts) on it, so its slave end is the controlling
// terminal of the program inside the sandbox. node-pty is a native module, loaded on first use
// only: a server that never opens a terminal works without it.
import { constants } from 'node:os';
import { join } from 'node:path';
import type { IPty } from '@lydell/node-pty';
import { ProviderError } from '../../provider-error.js';
import type { TerminalOpts, TerminalSession } from '../../provider.js';
import { definedFields } from '../../../util/defined-fields.js';
import { exportScript, shellQuote } from '../launch/environment.js';
import { buildTerminalCommand, TERMINAL_ENV_MAX_BYTES, TERMINAL_ENV_VAR } from '../launch/terminal-command.js';
import { preludeFor } from '../limits/entry-prelude.js';
import type { SandboxRegistry } from '../sandbox/registry.js';
import { specNetwork } from '../sandbox/spec.js';
import type { LocalSettings } from '../settings.js';
import { invalid } from '../validation.js';
import { CommandRunner } from './command-runner.js';

type NodePty = typeof import('@lydell/node-pty');

/** What a person sees when node-pty is not usable here. */
export const NODE_PTY_MISSING_DETAIL =
  'The shell needs the native module node-pty (the optional dependency @lydell/node-pty, prebuilt for Linux x64 and arm64), ' +
  'which could not be loaded on this machine. Reinstall sandbox-mcp with its optional dependencies (not with --omit=optional).';

let loading: Promise<NodePty> | undefined;

/**
 * Writes bytes to the terminal unchanged. @lydell/node-pty's typings say `write(string)`, but it
 * writes to a net.Socket, which takes bytes too; a string would be re-encoded, breaking a UTF-8
 * character that a read split in two.
 */
export function writeBytes(term: IPty, data: Buffer): void {
  (term.write as (data: string | Buffer) => void).call(term, data);
}

/** Loads node-pty once; throws unsupported (node_pty_missing) when it cannot be loaded. */
export async function loadNodePty(): Promise<NodePty> {
  loading ??= import('@lydell/node-pty').then((m) => ((m as { default?: NodePty }).default ?? m) as NodePty);
  try {
    const pty = await loading;
    if (typeof pty.spawn !== 'function') throw new Error('node-pty has no spawn');
    return pty;
  } catch {
    loading = undefined;
    throw new ProviderError('unsupported', { code: 'node_pty_missing', detail: NODE_PTY_MISSING_DETAIL });
  }
}

function checkSize(n: unknown, what: string): number {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10_000) throw invalid(`${what} must be an integer 1-10000.`);
  return n;
}

/** The terminal operation of the local provider. */
export class SandboxTerminals {
  constructor(
    private readonly settings: Pick<LocalSettings, 'shell' | 'cover'>,
    private readonly registry: SandboxRegistry,
    private readonly runner: CommandRunner,
  ) {}

  /** Opens a terminal running `opts.command` (default: the sandbox's shell, interactive) in the home. */
  async open(sandboxId: string, opts: TerminalOpts): Promise<TerminalSession> {
    const cols = checkSize(opts.cols, 'cols');
    const rows = checkSize(opts.rows, 'rows');
    if (opts.command?.some((a) => typeof a !== 'string' || a.includes('\0'))) throw invalid('command must be strings without NUL bytes.');
    const pty = await loadNodePty();
    const sb = await this.registry.require(sandboxId);
    const user = this.runner.commandUser(sb.spec, 'command');
    // The image's user starts where its commands do (its WorkingDir, home or `/`), not in root's home (0700).
    const envScript =
      exportScript(this.runner.commandEnv(sb, { TERM: opts.term ?? 'xterm-256color' })) +
      (user ? `cd -- ${shellQuote(CommandRunner.userStartDir(sb.spec, user))} 2>/dev/null || cd /\n` : '');
    if (Buffer.byteLength(envScript) > TERMINAL_ENV_MAX_BYTES) {
      throw new ProviderError('unsupported', {
        code: 'environment_too_large',
        detail: "The sandbox's environment is too large to hand to an interactive terminal.",
      });
    }
    const cmd = buildTerminalCommand({
      pid1: sb.keeper.pid1.pid,
      identity: sb.spec.identity,
      tools: sb.spec.tools,
      cgroupProcsFiles: sb.keeper.cgroups.map((d) => join(d, 'cgroup.procs')),
      network: specNetwork(sb.spec),
      sandboxShell: sb.spec.shell,
      ...(opts.command ? { command: opts.command } : {}),
      hostShell: this.settings.shell,
      inheritedFds: this.settings.cover?.fds ?? [],
      // A person's shell is the caller's own work: the commands' share of the process limit.
      // It joins the cgroups from the host (a pty spawner passes no descriptors), so none here.
      entry: preludeFor(sb.spec.limits, 'command', 0),
      ...definedFields({ template: this.runner.templateEntry(sb.spec, user) }),
    });
    let term: IPty;
    try {
      term = pty.spawn(cmd.file, cmd.args, {
        name: opts.term ?? 'xterm-256color',
        cols,
        rows,
        cwd: '/',
        // Only these reach the host-side helpers; the sandbox's environment travels as inert text.
        env: { PATH: this.runner.pathOf(sb.spec), [TERMINAL_ENV_VAR]: envScript },
        // Bytes, not text: the person's terminal gets exactly what the program printed.
        encoding: null,
      });
    } catch {
      throw new ProviderError('insufficient_resources', {
        code: 'pty_spawn_failed',
        detail:
          'No pseudo-terminal could be started on this machine (it may be out of pseudo-terminals, processes or open files): close other terminals or shells and retry.',
      });
    }
    term.onData((data) => opts.onData(typeof data === 'string' ? Buffer.from(data, 'utf8') : data));
    const exited = new Promise<number>((resolve) => {
      term.onExit(({ exitCode, signal }) => resolve(signal ? 128 + signal : exitCode));
    });
    const pid = term.pid;
    return {
      write: (data) => writeBytes(term, data),
      resize: (c, r) => {
        try {
          term.resize(checkSize(c, 'cols'), checkSize(r, 'rows'));
        } catch {
          // Resizing a terminal that just ended changes nothing.
        }
      },
      kill: () => {
        // The whole host-side group (the enter command and nsenter's child); the program inside
        // then loses its controlling terminal and gets SIGHUP like any logged-out session.
        for (const target of [-pid, pid]) {
          try {
            process.kill(target, constants.signals.SIGKILL);
          } catch {
            // Already gone.
          }
        }
      },
      exited,
    };
  }
}
