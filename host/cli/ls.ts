// `sandbox-mcp ls`: every sandbox of a provider with its tasks (tasks/listing.ts collects them),
// for people (aligned columns, relative times) or, with --json, for scripts. A sandbox whose
// tasks cannot be read gets a line saying why.
import type { TaskSummary } from '../../shared/protocol.js';
import { AGENT_WITHOUT_LIST, type ListedSandbox, type Listing } from '../tasks/listing.js';
import { formatBytes, formatDuration, formatRelative, renderTable, stateColour, type Cell } from './format.js';

function limitsText(s: ListedSandbox): string {
  const parts = [
    s.cpu_count !== null ? `cpu=${s.cpu_count}` : null,
    s.memory_mb !== null ? `mem=${s.memory_mb}MiB` : null,
    s.disk_size_mb !== null ? `disk=${s.disk_size_mb}MiB` : null,
  ].filter((p): p is string => p !== null);
  return parts.length > 0 ? parts.join(' ') : '-';
}

const isoMs = (iso: string | null) => (iso === null ? null : Date.parse(iso));
const unixMs = (s: number | null) => (s === null ? null : s * 1000);

function taskRows(tasks: readonly TaskSummary[], nowMs: number): Cell[][] {
  const header: Cell[] = ['TASK', 'STATE', 'EXIT', 'STARTED', 'DURATION', 'STDOUT', 'STDERR'].map((text) => ({
    text,
    colour: 'bold' as const,
  }));
  const rows = tasks.map((t): Cell[] => {
    const started = unixMs(t.started_at);
    const ended = unixMs(t.finished_at) ?? (t.state === 'running' ? nowMs : null);
    return [
      { text: t.task_id },
      { text: t.state, ...definedColour(stateColour(t.state)) },
      { text: t.exit_code === null ? '-' : String(t.exit_code) },
      { text: formatRelative(started, nowMs) },
      { text: started !== null && ended !== null ? formatDuration(ended - started) : '-' },
      // `+`: the stream reached the 1 MiB cap: it was longer than its log, whose size this is.
      { text: formatBytes(t.stdout_size) + (t.stdout_truncated ? '+' : '') },
      { text: formatBytes(t.stderr_size) + (t.stderr_truncated ? '+' : '') },
    ];
  });
  return [header, ...rows];
}

function definedColour(c: Cell['colour']): Pick<Cell, 'colour'> {
  return c ? { colour: c } : {};
}

/** The listing for people: one aligned row per sandbox, each followed by its tasks (indented) or why there are none. */
export function renderListing(listing: Listing, nowMs: number, colour: boolean): string {
  if (listing.sandboxes.length === 0) return 'No sandboxes.\n';
  const header: Cell[] = ['SANDBOX', 'TEMPLATE', 'STATE', 'STARTED', 'ENDS', 'LIMITS'].map((text) => ({ text, colour: 'bold' as const }));
  const sandboxRows = listing.sandboxes.map((s): Cell[] => [
    { text: s.sandbox_id },
    { text: s.template ?? '-' },
    { text: s.status ?? '-', ...definedColour(stateColour(s.status)) },
    { text: formatRelative(isoMs(s.started_at), nowMs) },
    { text: formatRelative(isoMs(s.end_at), nowMs) },
    { text: limitsText(s) },
  ]);
  // One table for the sandboxes, so their columns line up across the whole listing.
  const [headerLine, ...lines] = renderTable([header, ...sandboxRows], { colour });
  const out = [headerLine!];
  listing.sandboxes.forEach((s, i) => {
    out.push(lines[i]!);
    if (s.workspace !== null) out.push(`    workspace: ${s.workspace}`);
    if (s.tasks_error) {
      const what = s.tasks_error.code === AGENT_WITHOUT_LIST ? '' : `${s.tasks_error.category}: `;
      out.push(`    tasks unavailable: ${what}${s.tasks_error.suggestion}`);
    } else if (!s.tasks || s.tasks.length === 0) {
      out.push('    no tasks');
    } else {
      out.push(...renderTable(taskRows(s.tasks, nowMs), { indent: '    ', colour }));
      if (s.tasks_truncated) out.push('    (only the newest tasks are listed)');
    }
  });
  return out.join('\n') + '\n';
}
