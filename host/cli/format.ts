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
