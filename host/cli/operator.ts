// The operator's commands — ls, logs, shell, kill, cancel — for a person watching what agents run.
// They need no running server: each builds the same provider registry and agent client as the
// server does (handed in by cli.ts) and acts by explicit sandbox id, never adopting anything.
// This module parses their arguments (naming what is wrong, never echoing a value) and turns
// outcomes into exit statuses; each command lives in its own module.
import { parseArgs } from 'node:util';
import { LIMITS } from '../../shared/limits.js';
import { TASK_ID_PATTERN } from '../../shared/protocol.js';
import { loadConfig, type ServerConfig } from '../config.js';
import { isProviderError } from '../errors.js';
import { parseSandboxRef, type SandboxRef } from '../sandbox-ref.js';
import type { ServerDeps } from '../server-deps.js';
import { cancelTask } from './cancel.js';
import { isColourWanted } from './format.js';
import { killSandbox } from './kill.js';
import { followLogs } from './logs.js';
import { collectListing, renderListing } from './ls.js';
import { runShell } from './shell.js';

/** The operator's commands. */
export const OPERATOR_COMMANDS = ['ls', 'logs', 'shell', 'kill', 'cancel'] as const;
export type OperatorCommand = (typeof OPERATOR_COMMANDS)[number];

/** True when `name` is one of OPERATOR_COMMANDS. */
export function isOperatorCommand(name: string | undefined): name is OperatorCommand {
  return (OPERATOR_COMMANDS as readonly string[]).includes(name ?? '');
}

/** Exit statuses every operator command shares. */
export const OPERATOR_EXIT = { ok: 0, failed: 1, usage: 2 } as const;

/** A command line that cannot run; the message names the argument, never its value. */
export class OperatorUsageError extends Error {}

const OPTIONS = {
  help: { type: 'boolean', short: 'h' },
  provider: { type: 'string' },
  json: { type: 'boolean' },
  follow: { type: 'boolean', short: 'f' },
  stderr: { type: 'boolean' },
  from: { type: 'string' },
} as const;
type OptionName = keyof typeof OPTIONS;

/** Which options each command takes (help and provider: all), and its positional arguments. */
const SPECS: Record<OperatorCommand, { options: readonly OptionName[]; args: readonly string[]; usage: string }> = {
  ls: { options: ['json'], args: [], usage: 'sandbox-mcp ls [--provider local|e2b] [--json]' },
  logs: {
    options: ['follow', 'stderr', 'from'],
    args: ['sandbox_id', 'task_id'],
    usage: 'sandbox-mcp logs <sandbox_id> <task_id> [--follow] [--stderr] [--from N]',
  },
  shell: { options: [], args: ['sandbox_id'], usage: 'sandbox-mcp shell <sandbox_id> [-- command...]' },
  kill: { options: [], args: ['sandbox_id'], usage: 'sandbox-mcp kill <sandbox_id>' },
  cancel: { options: [], args: ['sandbox_id', 'task_id'], usage: 'sandbox-mcp cancel <sandbox_id> <task_id>' },
};

/** An operator command line, parsed. */
export interface OperatorLine {
  command: OperatorCommand;
  help: boolean;
  provider?: string;
  /** The positional arguments, by SPECS' names. */
  args: Record<string, string>;
  /** shell: the program after `--`. */
  program: string[];
  json: boolean;
  follow: boolean;
  stderr: boolean;
  from: number;
}

function printableOption(raw: string): string {
  return /^--?[A-Za-z0-9][A-Za-z0-9-]{0,40}$/.test(raw) ? ` ${raw}` : '';
}

/** Parses the argv of an operator command (the command's name included, anywhere among the options). */
export function parseOperatorLine(argv: readonly string[]): OperatorLine {
  const { tokens } = parseArgs({ args: [...argv], options: OPTIONS, strict: false, allowPositionals: true, tokens: true });
  const given = new Map<OptionName, string | undefined>();
  const positionals: string[] = [];
  const program: string[] = [];
  let afterTerminator = false;
  for (const token of tokens) {
    if (token.kind === 'option-terminator') afterTerminator = true;
    else if (token.kind === 'positional') (afterTerminator ? program : positionals).push(token.value);
    else {
      if (!(token.name in OPTIONS))
        throw new OperatorUsageError(`unknown option${printableOption(token.rawName)} (see sandbox-mcp --help)`);
      const name = token.name as OptionName;
      if (OPTIONS[name].type === 'string' && token.value === undefined) throw new OperatorUsageError(`--${name} needs a value`);
      if (OPTIONS[name].type === 'boolean' && token.value !== undefined) throw new OperatorUsageError(`--${name} takes no value`);
      if (given.has(name)) throw new OperatorUsageError(`--${name} is given more than once`);
      given.set(name, token.value);
    }
  }
  const [name, ...rest] = positionals;
  if (!isOperatorCommand(name)) throw new OperatorUsageError('unknown command (see sandbox-mcp --help)');
  const spec = SPECS[name];
  const help = given.has('help');
  if (!help) {
    for (const option of given.keys()) {
      if (option !== 'help' && option !== 'provider' && !spec.options.includes(option)) {
        throw new OperatorUsageError(`--${option} does not apply to ${name} (usage: ${spec.usage})`);
      }
    }
    if (rest.length !== spec.args.length) throw new OperatorUsageError(`usage: ${spec.usage}`);
    if (program.length > 0 && name !== 'shell') throw new OperatorUsageError(`usage: ${spec.usage}`);
  }
  let from = 0;
  const fromText = given.get('from');
  if (fromText !== undefined) {
    from = Number(fromText);
    if (fromText.trim() === '' || !Number.isInteger(from) || from < 0 || from > LIMITS.streamCapBytes) {
      throw new OperatorUsageError(`--from must be a byte offset 0-${LIMITS.streamCapBytes}`);
    }
  }
  const args: Record<string, string> = {};
  spec.args.forEach((arg, i) => (args[arg] = rest[i] ?? ''));
  if (!help && args.task_id !== undefined && !TASK_ID_PATTERN.test(args.task_id)) {
    throw new OperatorUsageError('task_id must be 32 lowercase hexadecimal characters (as start_task returned it)');
  }
  const provider = given.get('provider');
  return {
    command: name,
    help,
    ...(provider !== undefined ? { provider } : {}),
    args,
    program,
    json: given.has('json'),
    follow: given.has('follow'),
    stderr: given.has('stderr'),
    from,
  };
}

function sandboxArg(line: OperatorLine, config: ServerConfig): SandboxRef {
  try {
    return parseSandboxRef(line.args.sandbox_id ?? '', config.defaultProvider);
  } catch (e) {
    throw new OperatorUsageError(isProviderError(e) ? e.suggestion.replace('field `sandbox_id`', 'sandbox_id') : 'sandbox_id is not valid');
  }
}

const out = (text: string) => void process.stdout.write(text);
const note = (line: string) => void process.stderr.write(`sandbox-mcp: ${line}\n`);

/** Writes to stdout, waiting while its buffer is full; a reader that went away (EPIPE) ends the process quietly. */
function writeStdout(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once('drain', resolve);
  });
}

async function dispatch(line: OperatorLine, deps: ServerDeps): Promise<number> {
  const { config } = deps;
  switch (line.command) {
    case 'ls': {
      // --provider (or SANDBOX_MCP_PROVIDER) chose the default provider: ls lists that one.
      const listing = await collectListing(deps, [config.defaultProvider]);
      out(
        line.json
          ? JSON.stringify(listing, null, 2) + '\n'
          : renderListing(listing, Date.now(), isColourWanted(process.stdout, process.env)),
      );
      return OPERATOR_EXIT.ok;
    }
    case 'logs': {
      const interrupt = new AbortController();
      const onInterrupt = () => interrupt.abort();
      process.on('SIGINT', onInterrupt);
      try {
        return await followLogs(
          deps,
          {
            sandbox: sandboxArg(line, config),
            taskId: line.args.task_id!,
            stream: line.stderr ? 'stderr' : 'stdout',
            from: line.from,
            follow: line.follow,
          },
          { write: writeStdout, note, signal: interrupt.signal },
        );
      } finally {
        process.off('SIGINT', onInterrupt);
      }
    }
    case 'shell':
      return runShell(deps, sandboxArg(line, config), line.program, {
        stdin: process.stdin,
        stdout: process.stdout,
        env: process.env,
        onProcessExit(fn) {
          process.on('exit', fn);
          return () => process.off('exit', fn);
        },
        onTerminatingSignal(fn) {
          const signals = ['SIGTERM', 'SIGHUP', 'SIGINT'] as const;
          for (const s of signals) process.on(s, fn);
          return () => signals.forEach((s) => process.off(s, fn));
        },
      });
    case 'kill':
      out((await killSandbox(deps, sandboxArg(line, config))) + '\n');
      return OPERATOR_EXIT.ok;
    case 'cancel': {
      const outcome = await cancelTask(deps, sandboxArg(line, config), line.args.task_id!);
      if (outcome.isConfirmed) out(outcome.line + '\n');
      else note(outcome.line);
      return outcome.isConfirmed ? OPERATOR_EXIT.ok : OPERATOR_EXIT.failed;
    }
  }
}

/**
 * Runs one operator command and returns its exit status: 2 for a command line that cannot run,
 * 1 with the error's category and suggestion when the provider or agent refused, else the
 * command's own (see --help).
 */
export async function runOperatorCommand(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  buildDeps: (config: ServerConfig) => ServerDeps & { close(): Promise<void> },
  help: string,
): Promise<number> {
  let line: OperatorLine;
  try {
    line = parseOperatorLine(argv);
  } catch (e) {
    if (!(e instanceof OperatorUsageError)) throw e;
    note(e.message);
    return OPERATOR_EXIT.usage;
  }
  if (line.help) {
    out(help);
    return OPERATOR_EXIT.ok;
  }
  const config = loadConfig(env, line.provider);
  const deps = buildDeps(config);
  // A reader that stops reading (`logs … | head`) ends this command quietly.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(OPERATOR_EXIT.ok);
  });
  try {
    return await dispatch(line, deps);
  } catch (e) {
    if (e instanceof OperatorUsageError) {
      note(e.message);
      return OPERATOR_EXIT.usage;
    }
    if (isProviderError(e)) {
      note(`${e.category}: ${e.suggestion}`);
      return OPERATOR_EXIT.failed;
    }
    throw e;
  } finally {
    await deps.close();
  }
}
