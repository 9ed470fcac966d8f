// The operator commands' pure parts with exact expectations: their command line (every mistake
// named, no value echoed), people's formatting (columns, times, sizes, colour rules), logs' page joining
// and exit statuses, the ls rendering of a listing, and the --json shapes of logs, kill and cancel.
import { describe, expect, it } from 'vitest';
import {
  formatBytes,
  formatDuration,
  formatRelative,
  isColourWanted,
  paint,
  renderTable,
  safeForTerminal,
  TerminalText,
} from '../../host/cli/format.js';
import { cancelLine, CancelResultSchema, type CancelResult } from '../../host/cli/cancel.js';
import { killLine, KillResultSchema } from '../../host/cli/kill.js';
import {
  endLine,
  exitStatusFor,
  jsonLine,
  LOGS_EXIT,
  LogsChunkSchema,
  LogsEndSchema,
  LogsLineSchema,
  LogsTailSchema,
  logsEnd,
} from '../../host/cli/logs.js';
import { renderListing } from '../../host/cli/ls.js';
import { completeCharacters } from '../../host/util/utf8-pages.js';
import { AGENT_WITHOUT_LIST, ListingSchema, type Listing } from '../../host/tasks/listing.js';
import { HELP, parseCommandLine } from '../../host/cli/args.js';
import type { TaskView } from '../../shared/protocol.js';
import { usageError } from '../support/usage-error.js';

const TASK = '0123456789abcdef0123456789abcdef';

describe('the operator commands on the command line', () => {
  it('reads each command with its options, the command anywhere among them', () => {
    expect(parseCommandLine(['ls', '--json'])).toMatchObject({ command: 'ls', json: true, args: [] });
    expect(parseCommandLine(['--provider', 'e2b', 'ls'])).toMatchObject({ command: 'ls', provider: 'e2b' });
    expect(parseCommandLine(['logs', 'local:abc', TASK, '-f', '--stderr', '--from', '10'])).toMatchObject({
      command: 'logs',
      args: ['local:abc', TASK],
      follow: true,
      stderr: true,
      fromByte: 10,
    });
    expect(parseCommandLine(['logs', 'abc', TASK])).toMatchObject({ follow: false, stderr: false, fromByte: 0 });
    expect(parseCommandLine(['shell', 'abc'])).toMatchObject({ command: 'shell', args: ['abc'], program: [] });
    // After `--`, everything is the program's, options included.
    expect(parseCommandLine(['shell', 'abc', '--', 'ls', '-la', '--json'])).toMatchObject({
      args: ['abc'],
      program: ['ls', '-la', '--json'],
      json: false,
    });
    expect(parseCommandLine(['kill', 'abc'])).toMatchObject({ command: 'kill', args: ['abc'] });
    expect(parseCommandLine(['cancel', 'abc', TASK])).toMatchObject({ command: 'cancel', args: ['abc', TASK] });
    expect(parseCommandLine(['logs', '--help'])).toMatchObject({ command: 'logs', help: true });
    for (const argv of [
      ['logs', 'abc', TASK, '-f', '--json'],
      ['kill', 'abc', '--json'],
      ['cancel', 'abc', TASK, '--json'],
    ])
      expect(parseCommandLine(argv)).toMatchObject({ command: argv[0], json: true });
  });

  it('names what is wrong and never echoes a value', () => {
    expect(usageError(['ls', '--follow'])).toBe('--follow applies only to: sandbox-mcp logs');
    expect(usageError(['doctor', '--from', '1'])).toBe('--from applies only to: sandbox-mcp logs');
    expect(usageError(['ls', 'extra'])).toBe('ls takes no arguments (usage: sandbox-mcp ls [--json] [--provider local|e2b])');
    expect(usageError(['logs', 'abc'])).toBe('usage: sandbox-mcp logs <sandbox_id> <task_id> [--follow] [--stderr] [--from N] [--json]');
    expect(usageError(['shell'])).toBe('usage: sandbox-mcp shell <sandbox_id> [-- command...]');
    expect(usageError(['shell', 'abc', 'ls'])).toBe('usage: sandbox-mcp shell <sandbox_id> [-- command...]');
    expect(usageError(['kill', 'abc', '--', 'x'])).toBe('usage: sandbox-mcp kill <sandbox_id> [--json]');
    // An interactive terminal has no JSON form: the flag is named, not ignored.
    expect(usageError(['shell', 'abc', '--json'])).toMatch(/^--json applies only to: .*sandbox-mcp ls\b/);
    expect(usageError(['shell', 'abc', '--json'])).not.toContain('shell');
    expect(usageError(['logs', 'abc', TASK, '--from'])).toBe('--from needs a value');
    expect(usageError(['logs', 'abc', TASK, '--from=-1'])).toBe('--from must be an integer 0-1048576');
    expect(usageError(['logs', 'abc', TASK, '--from', '1048577'])).toBe('--from must be an integer 0-1048576');
    expect(usageError(['logs', 'abc', TASK, '--from', 'SECRET'])).not.toContain('SECRET');
    expect(usageError(['ls', '--json', '--json'])).toBe('--json is given more than once');
    expect(usageError(['ls', '--json=yes'])).toBe('--json takes no value');
    const unknown = usageError(['ls', '--token=hunter2-secret']);
    expect(unknown).toBe('unknown option --token (see sandbox-mcp --help)');
    expect(unknown).not.toContain('hunter2');
  });

  it('are documented in --help, with their exit statuses', () => {
    for (const command of ['ls', 'logs', 'shell', 'kill', 'cancel']) expect(HELP).toContain(`sandbox-mcp ${command} `);
    for (const code of Object.values(LOGS_EXIT)) expect(HELP).toContain(String(code));
    for (const command of ['logs', 'kill', 'cancel']) expect(HELP).toMatch(new RegExp(`sandbox-mcp ${command} .*\\[--json\\]`));
    expect(HELP).toContain('errors stay on stderr');
  });
});

describe('people formatting', () => {
  it('durations and relative times read coarsely', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(59_999)).toBe('59s');
    expect(formatDuration(60_000)).toBe('1m');
    expect(formatDuration(3_600_000 + 5 * 60_000)).toBe('1h05m');
    expect(formatDuration(50 * 3_600_000)).toBe('2d2h');
    const now = 1_000_000_000;
    expect(formatRelative(now - 12_000, now)).toBe('12s ago');
    expect(formatRelative(now + 4 * 60_000, now)).toBe('in 4m');
    expect(formatRelative(null, now)).toBe('-');
  });

  it('sizes in binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(1024 * 1024)).toBe('1.0 MiB');
  });

  it('colour only on a terminal, never with NO_COLOR set', () => {
    expect(isColourWanted({ isTTY: true }, {})).toBe(true);
    expect(isColourWanted({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    // no-color.org: an empty NO_COLOR does not count.
    expect(isColourWanted({ isTTY: true }, { NO_COLOR: '' })).toBe(true);
    expect(isColourWanted({ isTTY: false }, {})).toBe(false);
    expect(isColourWanted({}, {})).toBe(false);
    expect(paint('x', 'red', false)).toBe('x');
    expect(paint('x', 'red', true)).toBe('\x1b[31mx\x1b[0m');
  });

  it('aligns columns by text, colour added after padding', () => {
    const rows = [
      ['A', 'BBBB', 'C'],
      [{ text: 'long-one', colour: 'green' as const }, 'x', 'tail'],
    ];
    expect(renderTable(rows, { colour: false })).toEqual(['A         BBBB  C', 'long-one  x     tail']);
    const coloured = renderTable(rows, { colour: true, indent: '  ' });
    expect(coloured[1]).toBe('  \x1b[32mlong-one\x1b[0m  x     tail');
    // Without the escape codes, the coloured table is the plain one.
    const strip = (s: string) => s.replace(new RegExp(String.fromCharCode(27) + '\\[\\d+m', 'g'), '');
    expect(coloured.map(strip)).toEqual(renderTable(rows, { colour: false, indent: '  ' }));
  });
});

describe("a sandbox's output on a terminal", () => {
  it('keeps colours, newlines, carriage returns and tabs; shows every other escape as text', () => {
    const hostile = 'ok\n\x1b[1A\x1b[2Kgone\x1b]52;c;ZXZpbA==\x07\x1b]0;title\x07\x9b2J\x08\tend\r\n';
    const shown = safeForTerminal('\x1b[31mred\x1b[0m ' + hostile);
    expect(shown).toBe('\x1b[31mred\x1b[0m ok\n\\e[1A\\e[2Kgone\\e]52;c;ZXZpbA==\\a\\e]0;title\\a\\x9b2J\\b\tend\r\n');
    // Nothing but the two colour sequences is left that a terminal would act on.
    // eslint-disable-next-line no-control-regex -- the check is for control characters
    expect(shown.replace(/\x1b\[[0-9;]*m/g, '')).not.toMatch(/[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]/);
  });

  it('holds back a colour sequence cut between two pieces, and escapes a cut one that never ends', () => {
    const t = new TerminalText();
    expect(t.push('a\x1b[3')).toBe('a');
    expect(t.push('1mred\x1b')).toBe('\x1b[31mred');
    expect(t.push('[2J')).toBe('\\e[2J');
    expect(t.push('x\x1b[')).toBe('x');
    expect(t.flush()).toBe('\\e[');
  });
});

describe('logs pages and outcomes', () => {
  it('holds back a character split at the end of a page, and only that', () => {
    const bytes = Buffer.from('abé');
    const cut = bytes.subarray(0, 3); // 'ab' + the first byte of é
    const decoded = cut.toString('utf8');
    expect(decoded).toBe('ab\uFFFD');
    expect(completeCharacters(decoded, 3, false)).toEqual({ text: 'ab', bytes: 2 });
    // Nothing follows: printed as it is.
    expect(completeCharacters(decoded, 3, true)).toEqual({ text: 'ab\uFFFD', bytes: 3 });
    // A real U+FFFD (3 bytes) at the very end looks the same: held too, and printed with what follows.
    expect(completeCharacters('x\uFFFD', 4, false)).toEqual({ text: 'x', bytes: 1 });
    expect(completeCharacters('x\uFFFDy', 5, false)).toEqual({ text: 'x\uFFFDy', bytes: 5 });
    // Invalid bytes earlier in the page: the split cannot be located, the page is printed whole.
    const messy = Buffer.concat([Buffer.from([0xff]), Buffer.from('a'), Buffer.from('é').subarray(0, 1)]);
    expect(completeCharacters(messy.toString('utf8'), 3, false)).toEqual({ text: messy.toString('utf8'), bytes: 3 });
    expect(completeCharacters('plain', 5, false)).toEqual({ text: 'plain', bytes: 5 });
  });

  it('exits with the task code, or a distinct documented one', () => {
    expect(exitStatusFor({ state: 'succeeded', exit_code: 0 })).toBe(0);
    expect(exitStatusFor({ state: 'failed', exit_code: 7 })).toBe(7);
    expect(exitStatusFor({ state: 'failed', exit_code: null })).toBe(1);
    expect(exitStatusFor({ state: 'timed_out', exit_code: null })).toBe(LOGS_EXIT.timedOut);
    expect(exitStatusFor({ state: 'cancelled', exit_code: 143 })).toBe(LOGS_EXIT.cancelled);
    expect(exitStatusFor({ state: 'unknown', exit_code: null })).toBe(LOGS_EXIT.unknown);
    expect(exitStatusFor({ state: 'running', exit_code: null })).toBe(0);
    expect(new Set(Object.values(LOGS_EXIT)).size).toBe(4);
  });

  it('ends with a line that names the state and the cap', () => {
    const view = { task_id: TASK, state: 'failed', exit_code: 3, stdout_truncated: true, stderr_truncated: false } as TaskView;
    expect(endLine(view, 'stdout', true, true)).toBe(
      `task ${TASK} failed, exit code 3 (its stdout reached the 1 MiB cap: the stream's last 32 KiB were printed after the gap)`,
    );
    // No tail came (an older agent, or a supervisor that could not keep the end).
    expect(endLine(view, 'stdout', true, false)).toBe(
      `task ${TASK} failed, exit code 3 (its stdout reached the 1 MiB cap: the rest was not kept)`,
    );
    expect(endLine(view, 'stderr', true, false)).toBe(`task ${TASK} failed, exit code 3`);
    expect(endLine({ ...view, state: 'running' }, 'stdout', false, false)).toContain('--follow');
  });
});

describe('ls rendering', () => {
  const now = Date.parse('2026-01-01T12:00:00Z');
  const listing: Listing = {
    sandboxes: [
      {
        sandbox_id: 'local:aaaa',
        template: 'base',
        status: 'running',
        region: 'local',
        started_at: '2026-01-01T11:58:00Z',
        end_at: '2026-01-01T12:30:00Z',
        cpu_count: 2,
        memory_mb: 512,
        disk_size_mb: null,
        workspace: '/home/alice/project',
        tasks: [
          {
            task_id: TASK,
            state: 'running',
            exit_code: null,
            started_at: now / 1000 - 90,
            finished_at: null,
            stdout_size: 2048,
            stderr_size: 0,
            stdout_truncated: false,
            stderr_truncated: false,
          },
          {
            task_id: 'f'.repeat(32),
            state: 'failed',
            exit_code: 2,
            started_at: now / 1000 - 600,
            finished_at: now / 1000 - 540,
            stdout_size: 1024 * 1024,
            stderr_size: 10,
            stdout_truncated: true,
            stderr_truncated: false,
          },
        ],
        tasks_truncated: false,
        tasks_error: null,
      },
      {
        sandbox_id: 'local:bbbbbbbbbbbb',
        template: 'base',
        status: 'running',
        region: 'local',
        started_at: '2026-01-01T11:00:00Z',
        end_at: '2026-01-01T13:00:00Z',
        cpu_count: null,
        memory_mb: null,
        disk_size_mb: null,
        workspace: null,
        tasks: null,
        tasks_truncated: false,
        tasks_error: { category: 'unsupported', code: AGENT_WITHOUT_LIST, suggestion: 'too old' },
      },
    ],
  };

  it('is valid against its own schema', () => {
    expect(ListingSchema.parse(listing)).toEqual(listing);
  });

  it('prints aligned rows, each sandbox followed by its tasks or why there are none', () => {
    const text = renderListing(listing, now, false);
    expect(text).toBe(
      [
        'SANDBOX             TEMPLATE  STATE    STARTED    ENDS      LIMITS',
        'local:aaaa          base      running  2m ago     in 30m    cpu=2 mem=512MiB',
        '    workspace: /home/alice/project',
        '    TASK                              STATE    EXIT  STARTED  DURATION  STDOUT    STDERR',
        `    ${TASK}  running  -     1m ago   1m        2.0 KiB   0 B`,
        `    ${'f'.repeat(32)}  failed   2     10m ago  1m        1.0 MiB+  10 B`,
        'local:bbbbbbbbbbbb  base      running  1h00m ago  in 1h00m  -',
        '    tasks unavailable: too old',
        '',
      ].join('\n'),
    );
  });
});

describe('the --json shapes of logs, kill and cancel', () => {
  const sandbox = 'local:aaaa';

  it("logs: one line per chunk, a capped stream's kept end, then the end with the offset to resume from", () => {
    const chunk = { stream: 'stdout' as const, offset: 65535, text: 'a "quoted"\nline\u2028€' };
    const line = jsonLine(chunk);
    // JSON Lines: exactly one newline, at the end, whatever the text holds.
    expect(line.indexOf('\n')).toBe(line.length - 1);
    expect(LogsChunkSchema.parse(JSON.parse(line))).toEqual(chunk);
    const end = logsEnd({ state: 'failed', exit_code: 3 }, 90_000);
    expect(end).toEqual({ state: 'failed', exit_code: 3, next_offset: 90_000 });
    expect(LogsEndSchema.parse(JSON.parse(jsonLine(end)))).toEqual(end);
    expect(logsEnd({ state: 'running', exit_code: null }, 0)).toEqual({ state: 'running', exit_code: null, next_offset: 0 });
    const tail = { stream: 'stdout' as const, tail: '…THE-END\n' };
    expect(LogsTailSchema.parse(JSON.parse(jsonLine(tail)))).toEqual(tail);
    expect(LogsLineSchema.parse(tail)).toEqual(tail);
    // A line is one shape or another, never a mix.
    expect(LogsLineSchema.safeParse({ ...chunk, state: 'failed' }).success).toBe(false);
    expect(LogsLineSchema.safeParse({ ...chunk, tail: 'x' }).success).toBe(false);
  });

  it('kill: the sandbox and that it is gone; the line for people unchanged', () => {
    const result = { sandbox_id: sandbox, killed: true as const };
    expect(KillResultSchema.parse(result)).toEqual(result);
    expect(killLine(result)).toBe('killed local:aaaa');
  });

  it('cancel: state, exit code and whether the end is confirmed; the lines for people unchanged', () => {
    const base: CancelResult = { sandbox_id: sandbox, task_id: TASK, state: 'cancelled', exit_code: 143, confirmed: true };
    expect(CancelResultSchema.parse(base)).toEqual(base);
    expect(cancelLine(base)).toBe(`task ${TASK} cancelled`);
    expect(cancelLine({ ...base, state: 'failed', exit_code: 4 })).toBe(`task ${TASK} had already ended: failed, exit code 4`);
    expect(cancelLine({ ...base, state: 'timed_out', exit_code: null })).toBe(`task ${TASK} had already ended: timed_out`);
    expect(cancelLine({ ...base, state: 'unknown', exit_code: null, confirmed: false })).toBe(
      `task ${TASK}: cancellation not confirmed (state unknown); check again with \`sandbox-mcp ls\``,
    );
  });
});
