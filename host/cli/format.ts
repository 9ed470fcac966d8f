// Output for people: aligned columns, relative times, byte sizes, and colour only where it helps
// (a terminal, and never with NO_COLOR). Pure functions of their inputs; unit-tested.

/** The colours the CLI uses (ANSI SGR codes). */
const SGR = { bold: '1', dim: '2', red: '31', green: '32', yellow: '33', magenta: '35', cyan: '36' } as const;
export type Colour = keyof typeof SGR;

/** True when output to `stream` may be coloured: it is a terminal and NO_COLOR is unset or empty (no-color.org). */
export function isColourWanted(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && !env.NO_COLOR;
}

/** `text` in `colour` when `enabled`, else unchanged. */
export function paint(text: string, colour: Colour | undefined, enabled: boolean): string {
  return enabled && colour ? `\x1b[${SGR[colour]}m${text}\x1b[0m` : text;
}

/** The colour a task or sandbox state is shown in. */
export function stateColour(state: string | null): Colour | undefined {
  switch (state) {
    case 'running':
      return 'cyan';
    case 'succeeded':
      return 'green';
    case 'failed':
    case 'timed_out':
      return 'red';
    case 'cancelled':
    case 'paused':
      return 'yellow';
    case 'unknown':
      return 'magenta';
    default:
      return undefined;
  }
}

/** A span of time, coarse as people read it: 45s, 12m, 3h05m, 2d4h. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${h % 24}h`;
}

/** A moment relative to `nowMs`: "12s ago", "in 4m"; "-" when unknown. */
export function formatRelative(atMs: number | null, nowMs: number): string {
  if (atMs === null || !Number.isFinite(atMs)) return '-';
  return atMs <= nowMs ? `${formatDuration(nowMs - atMs)} ago` : `in ${formatDuration(atMs - nowMs)}`;
}

/** A byte count: 0 B, 900 B, 1.5 KiB, 1.0 MiB. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** One table cell: its text and, optionally, the colour it is shown in. */
export interface Cell {
  text: string;
  colour?: Colour;
}

/**
 * Lines of a table whose columns line up: each cell padded to its column's widest text (colour
 * added after padding, so escape codes never shift a column), two spaces between columns, no
 * trailing spaces.
 */
export function renderTable(rows: ReadonlyArray<ReadonlyArray<Cell | string>>, opts: { indent?: string; colour: boolean }): string[] {
  const cells = rows.map((row) => row.map((c) => (typeof c === 'string' ? { text: c } : c)));
  const widths: number[] = [];
  for (const row of cells) row.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.text.length)));
  return cells.map((row) => {
    const parts = row.map((c, i) => {
      const padded = i === row.length - 1 ? c.text : c.text.padEnd(widths[i] ?? 0);
      return paint(padded, c.colour, opts.colour);
    });
    return ((opts.indent ?? '') + parts.join('  ')).trimEnd();
  });
}

const NAMED_ESCAPES: Record<string, string> = { '\x1b': '\\e', '\r': '\\r', '\b': '\\b', '\f': '\\f', '\v': '\\v', '\x07': '\\a' };

/**
 * `line` with every control character (C0 but tab, DEL, C1) shown as an escape (`\e`, `\r`,
 * `\x7f`, `\x9b`), as git shows such bytes in a name: nothing in a file moves the cursor, erases
 * or recolours on a terminal.
 */
export function escapeControls(line: string): string {
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  return line.replace(/[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]/g, (c) => {
    const named = NAMED_ESCAPES[c];
    if (named) return named;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

// An SGR sequence (colours, bold): what a program's coloured output holds, harmless on a terminal.
// eslint-disable-next-line no-control-regex -- matching escape sequences is the point
const SGR_SEQUENCE = /^\x1b\[[0-9;:]{0,32}m/;
// The start of an escape sequence a chunk may have cut: held back for the next chunk.
// eslint-disable-next-line no-control-regex -- matching escape sequences is the point
const PARTIAL_SGR = /\x1b(\[[0-9;:]{0,32})?$/;

/**
 * Output a sandbox wrote, made safe for a terminal piece by piece (`sandbox-mcp logs` on a
 * terminal): colour sequences pass, newlines, carriage returns and tabs pass, every other control character is
 * shown escaped (escapeControls), so no output moves the cursor, erases lines, sets the title or
 * writes the clipboard. A colour sequence cut between two pieces is held back until the next.
 */
export class TerminalText {
  private held = '';

  /** The safe form of `piece` (with what was held before it), holding back a cut sequence at its end. */
  push(piece: string): string {
    let text = this.held + piece;
    const partial = PARTIAL_SGR.exec(text);
    this.held = partial ? partial[0] : '';
    if (partial) text = text.slice(0, partial.index);
    return safeForTerminal(text);
  }

  /** What is still held back, made safe (at the end of the output). */
  flush(): string {
    const rest = this.held;
    this.held = '';
    return escapeControls(rest);
  }
}

/** `text` with colour sequences, newlines, carriage returns and tabs kept and every other control character escaped. */
export function safeForTerminal(text: string): string {
  let out = '';
  let rest = text;
  for (;;) {
    const esc = rest.indexOf('\x1b');
    if (esc === -1) return out + escapeLines(rest);
    out += escapeLines(rest.slice(0, esc));
    const sgr = SGR_SEQUENCE.exec(rest.slice(esc));
    if (sgr) {
      out += sgr[0];
      rest = rest.slice(esc + sgr[0].length);
    } else {
      out += '\\e';
      rest = rest.slice(esc + 1);
    }
  }
}

/**
 * escapeControls for text of many lines: its newlines kept, and carriage returns (a progress bar
 * redrawing its line), which never leave the line they are on.
 */
function escapeLines(text: string): string {
  return text
    .split(/([\n\r])/)
    .map((part) => (part === '\n' || part === '\r' ? part : escapeControls(part)))
    .join('');
}
