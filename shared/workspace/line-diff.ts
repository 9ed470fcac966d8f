// Line diffs and unified-diff hunks, pure: Myers' O(ND) algorithm (E. W. Myers, "An O(ND)
// Difference Algorithm and Its Variations", 1986) on lines that keep their terminators, so a last
// line without a newline differs from the same line with one, as in git. The edit distance is
// bounded: past `maxEdits` the differing middle is replaced whole — a longer patch, never a wrong one.

/** One run of a diff: `count` lines kept, removed from the old text or added from the new. */
export interface DiffRun {
  op: 'equal' | 'delete' | 'insert';
  count: number;
}

/** The lines of `text`, each with its `\n` (the last may have none); none for the empty text. */
export function splitLines(text: string): string[] {
  const lines: string[] = [];
  let start = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', start)) {
    lines.push(text.slice(start, i + 1));
    start = i + 1;
  }
  if (start < text.length) lines.push(text.slice(start));
  return lines;
}

/** The default bound on the edit distance Myers' search explores (its memory grows with the square of it). */
export const DEFAULT_MAX_EDITS = 2000;

/**
 * The runs that turn `a` into `b`: a shortest edit script when it takes at most `maxEdits` line
 * insertions and deletions (after the common start and end are set aside), else the whole differing
 * middle deleted and inserted. Consecutive runs never share an op.
 */
export function diffLines(a: readonly string[], b: readonly string[], maxEdits = DEFAULT_MAX_EDITS): DiffRun[] {
  let prefix = 0;
  while (prefix < a.length && prefix < b.length && a[prefix] === b[prefix]) prefix++;
  let suffix = 0;
  while (suffix < a.length - prefix && suffix < b.length - prefix && a[a.length - 1 - suffix] === b[b.length - 1 - suffix]) suffix++;
  const middleA = a.slice(prefix, a.length - suffix);
  const middleB = b.slice(prefix, b.length - suffix);
  const runs: DiffRun[] = [];
  push(runs, 'equal', prefix);
  const middle = shortestEdits(middleA, middleB, maxEdits);
  if (middle) for (const r of middle) push(runs, r.op, r.count);
  else {
    push(runs, 'delete', middleA.length);
    push(runs, 'insert', middleB.length);
  }
  push(runs, 'equal', suffix);
  return runs;
}

function push(runs: DiffRun[], op: DiffRun['op'], count: number): void {
  if (count === 0) return;
  const last = runs[runs.length - 1];
  if (last && last.op === op) last.count += count;
  else runs.push({ op, count });
}

/**
 * Myers' greedy forward search, keeping each step's furthest-reaching x per diagonal so the path
 * can be traced back; null when the distance exceeds `maxEdits`.
 */
function shortestEdits(a: readonly string[], b: readonly string[], maxEdits: number): DiffRun[] | null {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0) {
    const runs: DiffRun[] = [];
    push(runs, 'delete', n);
    push(runs, 'insert', m);
    return runs;
  }
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  // trace[d] holds v as it was after step d - 1 (the x reached on each diagonal), for diagonals -d..d.
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice(offset - d - 1, offset + d + 2));
    for (let k = -d; k <= d; k += 2) {
      const goDown = k === -d || (k !== d && v[offset + k - 1]! < v[offset + k + 1]!);
      let x = goDown ? v[offset + k + 1]! : v[offset + k - 1]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, d, n, m);
    }
  }
  return null;
}

/** The runs of the path found at step `dFound`, reading the kept snapshots backwards. */
function backtrack(trace: readonly Int32Array[], dFound: number, n: number, m: number): DiffRun[] {
  const reversed: DiffRun[] = [];
  let x = n;
  let y = m;
  for (let d = dFound; d > 0; d--) {
    const snapshot = trace[d]!;
    // snapshot[j] is diagonal j - d - 1.
    const at = (k: number): number => snapshot[k + d + 1]!;
    const k = x - y;
    const goDown = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = goDown ? k + 1 : k - 1;
    const prevX = at(prevK);
    const prevY = prevX - prevK;
    const startX = goDown ? prevX : prevX + 1;
    const snake = x - startX;
    pushFront(reversed, 'equal', snake);
    pushFront(reversed, goDown ? 'insert' : 'delete', 1);
    x = prevX;
    y = prevY;
  }
  pushFront(reversed, 'equal', x);
  return reversed.reverse();
}

// Builds the run list backwards (the list is reversed at the end).
function pushFront(reversed: DiffRun[], op: DiffRun['op'], count: number): void {
  push(reversed, op, count);
}

/** Lines of context around each change in a hunk, as `diff -u` and git print by default. */
export const CONTEXT_LINES = 3;

/**
 * The hunks of a unified diff of `a` into `b` (`@@ … @@` headers and ` `/`-`/`+` lines, a line
 * without a newline followed by `\ No newline at end of file`), or '' when they are equal.
 */
export function unifiedHunks(a: readonly string[], b: readonly string[], maxEdits = DEFAULT_MAX_EDITS, context = CONTEXT_LINES): string {
  const runs = diffLines(a, b, maxEdits);
  // Walk the runs as a list of changed regions with their positions in a and b.
  interface Change {
    aStart: number;
    aEnd: number;
    bStart: number;
    bEnd: number;
  }
  const changes: Change[] = [];
  let ai = 0;
  let bi = 0;
  for (const run of runs) {
    if (run.op === 'equal') {
      ai += run.count;
      bi += run.count;
      continue;
    }
    const last = changes[changes.length - 1];
    const current = last && last.aEnd === ai && last.bEnd === bi ? last : { aStart: ai, aEnd: ai, bStart: bi, bEnd: bi };
    if (current !== last) changes.push(current);
    if (run.op === 'delete') ai += run.count;
    else bi += run.count;
    current.aEnd = ai;
    current.bEnd = bi;
  }
  if (changes.length === 0) return '';
  // Group changes whose contexts touch or overlap into hunks.
  const out: string[] = [];
  let i = 0;
  while (i < changes.length) {
    let j = i;
    while (j + 1 < changes.length && changes[j + 1]!.aStart - changes[j]!.aEnd <= 2 * context) j++;
    const first = changes[i]!;
    const lastChange = changes[j]!;
    const aFrom = Math.max(0, first.aStart - context);
    const aTo = Math.min(a.length, lastChange.aEnd + context);
    const bFrom = first.bStart - (first.aStart - aFrom);
    const bTo = lastChange.bEnd + (aTo - lastChange.aEnd);
    out.push(`@@ -${range(aFrom, aTo - aFrom)} +${range(bFrom, bTo - bFrom)} @@\n`);
    let aPos = aFrom;
    for (let c = i; c <= j; c++) {
      const ch = changes[c]!;
      for (; aPos < ch.aStart; aPos++) out.push(line(' ', a[aPos]!));
      for (let p = ch.aStart; p < ch.aEnd; p++) out.push(line('-', a[p]!));
      for (let p = ch.bStart; p < ch.bEnd; p++) out.push(line('+', b[p]!));
      aPos = ch.aEnd;
    }
    for (; aPos < aTo; aPos++) out.push(line(' ', a[aPos]!));
    i = j + 1;
  }
  return out.join('');
}

/** A hunk range as git prints it: `start,count`, `start` alone for one line, the line before for none. */
function range(from: number, count: number): string {
  if (count === 0) return `${from},0`;
  if (count === 1) return `${from + 1}`;
  return `${from + 1},${count}`;
}

function line(prefix: string, text: string): string {
  return text.endsWith('\n') ? `${prefix}${text}` : `${prefix}${text}\n\\ No newline at end of file\n`;
}
