// Server diagnostics: one JSON line per event on stderr (stdout belongs to the stdio transport).
// Only static messages and whitelisted fields are logged: never argument values, secrets or raw
// provider messages.
import { switchValue } from './switch.js';

type Fields = Record<string, string | number | boolean | undefined>;

/** A minimal structured logger writing to stderr. */
export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  debug(msg: string, fields?: Fields): void;
}

/** The variable that turns debug lines on (1 or true), in the server and in the keepers it starts. */
export const DEBUG_ENV = 'SANDBOX_MCP_DEBUG';

/**
 * Whether `env` turns debug lines on. A value that is neither on nor off is off here, so a keeper
 * reading it never fails; the server refuses one at start-up (loadConfig).
 */
export function isDebugOn(env: NodeJS.ProcessEnv): boolean {
  return switchValue(env[DEBUG_ENV]) === true;
}

/** Logs to stderr; debug lines only when `isDebug` (see isDebugOn). */
export function createLogger(opts: { isDebug?: boolean; write?: (line: string) => void } = {}): Logger {
  const write = opts.write ?? writeStderr;
  const emit = (level: string, msg: string, fields?: Fields) =>
    write(JSON.stringify({ t: new Date().toISOString(), level, msg, ...fields }) + '\n');
  return {
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    debug: (msg, fields) => {
      if (opts.isDebug) emit('debug', msg, fields);
    },
  };
}

let isStderrGuarded = false;

function writeStderr(line: string): void {
  if (!isStderrGuarded) {
    // A log that can no longer be written (the terminal closed, the reader left) must not kill
    // the process mid-cleanup with an unhandled 'error': the line is lost, nothing else.
    process.stderr.on('error', () => undefined);
    isStderrGuarded = true;
  }
  process.stderr.write(line);
}
