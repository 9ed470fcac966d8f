// Pure builders for an interactive terminal in a local sandbox: the host-side command a pty
// spawner runs (close inherited descriptors, drop privileges, enter the sandbox as exec does) and
// the in-sandbox prelude. Unit-tested in test/unit/terminal-command.test.ts; test/e2e/shell.test.ts runs them.
import { ProviderError } from '../../provider-error.js';
import type { NetworkMode } from '../../provider.js';
import { buildEnterCommand, dropWithSetpriv, type Command, type Identity, type TemplateEntry, type ToolPaths } from './command-lines.js';

/**
 * The variable that carries the sandbox's environment (exportScript text) to the prelude. A pty
 * spawner has no spare descriptor to pass it on as exec does (fd 4), and this one name is inert
 * to the host-side helpers (unlike LD_PRELOAD and friends, which never leave the script).
 */
export const TERMINAL_ENV_VAR = '__sandbox_mcp_env';

/** Linux refuses a larger single environment string (MAX_ARG_STRLEN); a little is kept for the name. */
export const TERMINAL_ENV_MAX_BYTES = 128 * 1024 - 64;

/**
 * Runs `$@` on the terminal after sourcing the environment. The terminal is the host's pty, whose
 * name (/dev/pts/N, as readlink shows it) does not exist in the sandbox's private /dev; a link of
 * that name to this process's stdin lets ttyname(3), and so `tty`, ssh or gpg, find it — without
 * the host's /dev/pts (every other terminal of the host) ever being visible. The prelude's pid is
 * the program's (exec), so the link works as long as the program runs.
 */
export const TERMINAL_PRELUDE =
  'tty_=$(readlink /proc/self/fd/0 2>/dev/null); ' +
  'case $tty_ in /dev/pts/[0-9]*) mkdir -p /dev/pts 2>/dev/null; ln -sfn "/proc/$$/fd/0" "$tty_" 2>/dev/null;; esac; ' +
  // Links of terminals that ended point nowhere: they go, so no old name outlives its terminal.
  'for tty_ in /dev/pts/*; do [ -e "$tty_" ] || rm -f "$tty_"; done 2>/dev/null; unset tty_; ' +
  // node-pty leaves IUTF8 off when it hands over bytes: line editing then erases whole UTF-8 characters.
  'stty iutf8 2>/dev/null; ' +
  // Last, so that nothing above runs with the sandbox's own PATH or variables.
  `eval "$${TERMINAL_ENV_VAR}"; unset ${TERMINAL_ENV_VAR}; exec "$@"`;

/** Shell text that closes `fds` and then execs `$@`; bash can name any descriptor, other shells only 0-9. */
export function closeFdsScript(fds: readonly number[], shell: string): string {
  if (!shell.endsWith('bash') && fds.some((fd) => fd > 9)) {
    throw new ProviderError('unsupported', {
      code: 'inherited_descriptors',
      detail:
        'This process inherited open descriptors that only bash can close before entering a sandbox; install bash or start it without them.',
    });
  }
  return `${fds.map((fd) => `exec ${fd}>&-; `).join('')}exec "$@"`;
}

/** Where and how the terminal's program runs. */
export interface TerminalCommandOpts {
  pid1: number;
  identity: Identity;
  tools: ToolPaths;
  cgroupProcsFiles: readonly string[];
  network: NetworkMode;
  /** The sandbox's shell: it runs the prelude, and `-i` of it is the default program. */
  sandboxShell: string;
  /** The program to run instead of an interactive shell. */
  command?: readonly string[];
  /** The host's shell, which closes inherited descriptors before anything enters the sandbox. */
  hostShell: string;
  /** Descriptors this process inherited without close-on-exec: none of them may reach the sandbox. */
  inheritedFds: readonly number[];
  /** The entry prelude (limits/entry-prelude.ts: the sandbox's rlimits), run inside before anything else. */
  entry?: string;
  /** How a template sandbox is entered (its entry helper); absent for a base sandbox. */
  template?: TemplateEntry;
}

/**
 * The full host-side command of a terminal: the same enter command as exec (namespaces, cgroups,
 * identity — whatever later changes buildEnterCommand gets applies here too), with the drop done
 * by setpriv and inherited descriptors closed first.
 */
export function buildTerminalCommand(opts: TerminalCommandOpts): Command {
  const program = opts.command && opts.command.length > 0 ? [...opts.command] : [opts.sandboxShell, '-i'];
  const inner = [opts.sandboxShell, '-c', (opts.entry ?? '') + TERMINAL_PRELUDE, opts.sandboxShell, ...program];
  const enter = dropWithSetpriv(
    buildEnterCommand(opts.pid1, inner, opts.identity, opts.tools, opts.cgroupProcsFiles, opts.network, opts.template),
    opts.tools,
  );
  if (opts.inheritedFds.length === 0) return enter;
  return { file: opts.hostShell, args: ['-c', closeFdsScript(opts.inheritedFds, opts.hostShell), 'sh', enter.file, ...enter.args] };
}
