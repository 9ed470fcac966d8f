// The server's resource limits as flags and environment variables: one table that --help, the
// configuration loader and the README's configuration table follow (a flag wins over its variable).
import { MIN_MEMORY_MB, MIN_PROCESSES, type LimitOpts } from '../providers/local/limits/settings.js';

/** The limit flags' names (without --). */
export type LimitFlag =
  | 'max-sandboxes'
  | 'sandbox-processes'
  | 'sandbox-memory'
  | 'max-sandbox-memory'
  | 'max-sandbox-cpu'
  | 'max-total-memory'
  | 'sandbox-disk'
  | 'sandbox-open-files'
  | 'max-waiting-gets';

/** One limit: its flag (without --), its environment variable, where it goes, its minimum, what it sets and its default. */
export interface LimitOption {
  flag: LimitFlag;
  env: string;
  key: keyof LimitOpts | 'maxWaitingGets';
  min: number;
  help: string;
  defaultText: string;
}

/** Concurrent get_task calls with wait > 0 per sandbox, by default. */
export const DEFAULT_MAX_WAITING_GETS = 4;

/** Every limit option, in the order --help lists them. */
export const LIMIT_OPTIONS: readonly LimitOption[] = [
  {
    flag: 'max-sandboxes',
    env: 'SANDBOX_MCP_MAX_SANDBOXES',
    key: 'maxSandboxes',
    min: 1,
    help: 'live local sandboxes, counted in the state directory',
    defaultText: '16',
  },
  {
    flag: 'sandbox-processes',
    env: 'SANDBOX_MCP_SANDBOX_PROCESSES',
    key: 'processes',
    min: MIN_PROCESSES,
    help: `processes and threads per local sandbox (at least ${MIN_PROCESSES})`,
    defaultText: '1024',
  },
  {
    flag: 'sandbox-memory',
    env: 'SANDBOX_MCP_SANDBOX_MEMORY',
    key: 'memoryMb',
    min: MIN_MEMORY_MB,
    help: 'memory limit (MB) of a local sandbox created without `memory`; its files count too',
    defaultText: 'a quarter of RAM, at most 4096',
  },
  {
    flag: 'max-sandbox-memory',
    env: 'SANDBOX_MCP_MAX_SANDBOX_MEMORY',
    key: 'maxMemoryMb',
    min: MIN_MEMORY_MB,
    help: 'the most `memory` (MB) create_sandbox may ask for',
    defaultText: 'half of RAM',
  },
  {
    flag: 'max-sandbox-cpu',
    env: 'SANDBOX_MCP_MAX_SANDBOX_CPU',
    key: 'maxCpu',
    min: 1,
    help: 'the most `cpu` create_sandbox may ask for',
    defaultText: 'the CPU count',
  },
  {
    flag: 'max-total-memory',
    env: 'SANDBOX_MCP_MAX_TOTAL_MEMORY',
    key: 'maxTotalMemoryMb',
    min: MIN_MEMORY_MB,
    help: 'the most memory (MB) all local sandboxes of the state directory may use together (a parent memory cgroup)',
    defaultText: 'half of RAM',
  },
  {
    flag: 'sandbox-disk',
    env: 'SANDBOX_MCP_SANDBOX_DISK',
    key: 'diskMb',
    min: 16,
    help: 'MB of files a local sandbox may keep in /home/user, /tmp, /var/tmp and /dev/shm together, at most half its memory limit',
    defaultText: '2048',
  },
  {
    flag: 'sandbox-open-files',
    env: 'SANDBOX_MCP_SANDBOX_OPEN_FILES',
    key: 'openFiles',
    min: 64,
    help: 'open files per process in a local sandbox',
    defaultText: '4096',
  },
  {
    flag: 'max-waiting-gets',
    env: 'SANDBOX_MCP_MAX_WAITING_GETS',
    key: 'maxWaitingGets',
    min: 1,
    help: 'get_task calls waiting (wait > 0) at once per sandbox',
    defaultText: String(DEFAULT_MAX_WAITING_GETS),
  },
];

/** The --help lines of the limit options, in the layout of the other options (wrapped at 96 columns). */
export function limitOptionsHelp(): string {
  const lines: string[] = [];
  for (const o of LIMIT_OPTIONS) {
    let line = `  --${o.flag} N`.padEnd(25);
    for (const word of `${o.help} (env ${o.env}; default ${o.defaultText})`.split(' ')) {
      if (line.length + word.length > 95 && line.trim() !== '') {
        lines.push(line.trimEnd());
        line = ' '.repeat(25);
      }
      line += word + ' ';
    }
    lines.push(line.trimEnd());
  }
  return lines.join('\n');
}
