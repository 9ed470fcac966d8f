// The operator's commands — ls, logs, shell, kill, cancel, snapshot, diff, apply — for a person
// watching what agents run and taking their workspace changes.
// They need no running server: each builds the same provider registry and agent client as the
// server does (handed in by run.ts) and acts by explicit sandbox id, never adopting anything.
// args.ts parses their command line; this module checks their ids (naming what is wrong,
// never echoing a value), runs the command's own module and returns its exit status. With --json
// each prints the shape its module declares (on stdout); errors stay on stderr, as without it.
import { TASK_ID_PATTERN } from '../../shared/protocol.js';
import { UsageError, type CommandLine } from './args.js';
import type { ServerConfig } from '../config/config.js';
import { isProviderError } from '../providers/provider-error.js';
import { parseSandboxRef, type SandboxRef } from '../providers/sandbox-ref.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import { applyLine, applyWorkspace } from './apply.js';
import { cancelLine, cancelTask } from './cancel.js';
import { readDiff, renderDiff } from './diff.js';
import { isColourWanted } from './format.js';
import { killLine, killSandbox } from './kill.js';
import { followLogs } from './logs.js';
import { renderListing } from './ls.js';
import { collectListing } from '../tasks/listing.js';
import { runShell } from './shell.js';
import { snapshotLines, snapshotSandbox } from './snapshot.js';
import { isStorableTemplateName } from '../providers/local/templates/store.js';
import { TEMPLATE_NAME_RULE } from '../providers/local/templates/refusals.js';

/** The operator's commands (a subset of cli-args' COMMANDS). */
export const OPERATOR_COMMANDS = ['ls', 'logs', 'shell', 'kill', 'cancel', 'snapshot', 'diff', 'apply'] as const;
export type OperatorCommand = (typeof OPERATOR_COMMANDS)[number];

/** Exit statuses every operator command shares (others: logs' LOGS_EXIT, shell's program status). */
export const OPERATOR_EXIT = { ok: 0, failed: 1 } as const;

/** A sandbox id from the command line; a malformed one is a bad command line (UsageError: exit 2), named, never quoted. */
export function sandboxIdArg(raw: string, config: Pick<ServerConfig, 'defaultProvider'>): SandboxRef {
  try {
    return parseSandboxRef(raw, config.defaultProvider);
  } catch (e) {
    throw new UsageError(isProviderError(e) ? e.suggestion.replace('field `sandbox_id`', 'sandbox_id') : 'sandbox_id is not valid');
  }
}

function sandboxArg(line: CommandLine, config: ServerConfig): SandboxRef {
  return sandboxIdArg(line.args[0] ?? '', config);
}

function taskArg(line: CommandLine): string {
  const taskId = line.args[1] ?? '';
  if (!TASK_ID_PATTERN.test(taskId))
    throw new UsageError('task_id must be 32 lowercase hexadecimal characters (as start_task returned it)');
  return taskId;
}

const out = (text: string) => void process.stdout.write(text);
const note = (line: string) => void process.stderr.write(`sandbox-mcp: ${line}\n`);

/** Writes to stdout, waiting while its buffer is full. */
function writeStdout(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once('drain', resolve);
  });
}

async function dispatch(command: OperatorCommand, line: CommandLine, deps: ServerDeps): Promise<number> {
  const { config } = deps;
  switch (command) {
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
      const opts = {
        sandbox: sandboxArg(line, config),
        taskId: taskArg(line),
        stream: line.stderr ? 'stderr' : 'stdout',
        from: line.fromByte,
        follow: line.follow,
      } as const;
      const interrupt = new AbortController();
      const onInterrupt = () => interrupt.abort();
      process.on('SIGINT', onInterrupt);
      try {
        return await followLogs(deps, opts, { write: writeStdout, note, signal: interrupt.signal, json: line.json });
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
    case 'kill': {
      const result = await killSandbox(deps, sandboxArg(line, config));
      out((line.json ? JSON.stringify(result) : killLine(result)) + '\n');
      return OPERATOR_EXIT.ok;
    }
    case 'diff': {
      const sandbox = sandboxArg(line, config);
      const report = await readDiff(deps, sandbox);
      if (line.json) {
        const { workspace, ...rest } = report;
        await writeStdout(
          JSON.stringify({ sandbox_id: sandbox.qualified, host_path: workspace.hostPath, path: workspace.path, ...rest }) + '\n',
        );
      } else {
        // Unescaped only where no terminal interprets it.
        const raw = line.raw && !process.stdout.isTTY;
        await writeStdout(renderDiff(sandbox, report, isColourWanted(process.stdout, process.env), raw));
      }
      return OPERATOR_EXIT.ok;
    }
    case 'apply': {
      const sandbox = sandboxArg(line, config);
      const result = await applyWorkspace(deps, sandbox, { isWorktree: line.worktree });
      out((line.json ? JSON.stringify(result) : applyLine(result)) + '\n');
      return OPERATOR_EXIT.ok;
    }
    case 'snapshot': {
      const name = line.args[1] ?? '';
      if (!isStorableTemplateName(name)) throw new UsageError(`NAME must be ${TEMPLATE_NAME_RULE}`);
      const result = await snapshotSandbox(deps, sandboxArg(line, config), name, { keepAptCache: line.keepAptCache });
      out(line.json ? JSON.stringify(result) + '\n' : snapshotLines(result));
      return OPERATOR_EXIT.ok;
    }
    case 'cancel': {
      const result = await cancelTask(deps, sandboxArg(line, config), taskArg(line));
      // For scripts the object says whether it is confirmed, so it is always the answer on stdout.
      if (line.json) out(JSON.stringify(result) + '\n');
      else if (result.confirmed) out(cancelLine(result) + '\n');
      else note(cancelLine(result));
      return result.confirmed ? OPERATOR_EXIT.ok : OPERATOR_EXIT.failed;
    }
  }
}

/**
 * Runs one operator command and returns its exit status (see --help). A bad id throws
 * UsageError, a refusal of the provider or agent its ProviderError: runCli prints them (exit 2, 1).
 */
export async function runOperatorCommand(
  command: OperatorCommand,
  line: CommandLine,
  config: ServerConfig,
  buildDeps: (config: ServerConfig) => ServerDeps & { close(): Promise<void> },
): Promise<number> {
  const deps = buildDeps(config);
  // A reader that stops reading (`logs … | head`) ends this command quietly.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(OPERATOR_EXIT.ok);
  });
  try {
    return await dispatch(command, line, deps);
  } finally {
    await deps.close();
    await flushStdout();
  }
}

/**
 * Waits until stdout has passed on everything written to it: process.exit follows, and what a slow
 * reader had not taken yet (a full pipe: `logs` of a capped stream into `… | less`) would be lost.
 */
function flushStdout(): Promise<void> {
  if (process.stdout.writableLength === 0) return Promise.resolve();
  return new Promise((resolve) => process.stdout.write('', () => resolve()));
}
