// `sandbox-mcp diff <id>`: what a sandbox changed in its workspace, for the person to review before
// `apply` — the unified diff (coloured on a terminal), then what it does not show: binary and large
// files, and the paths the host changed since create. Masked as `logs` and workspace_changes mask.
// The files' content is the sandbox's: its control characters are shown escaped, so none reaches
// the person's terminal as a command (cursor moves, erased lines, a changed title).
import { WORKSPACE_LIMITS } from '../../shared/protocol.js';
import type { ServerDeps } from '../mcp/server-deps.js';
import type { SandboxRef } from '../providers/sandbox-ref.js';
import { readWorkspaceChanges, type WorkspaceReport } from '../tasks/workspace-changes.js';
import { formatBytes, paint } from './format.js';

/** What `diff` reads: every change the agent lists and the patch up to the protocol's largest. */
export async function readDiff(deps: Pick<ServerDeps, 'providers' | 'agent' | 'masker'>, sandbox: SandboxRef): Promise<WorkspaceReport> {
  const provider = deps.providers.get(sandbox.provider);
  await deps.masker.learn(sandbox.qualified, () => provider.getEnvironment(sandbox.id));
  const report = await readWorkspaceChanges(provider, deps.agent, sandbox.id, {
    patch: true,
    maxPatchBytes: WORKSPACE_LIMITS.maxPatchBytes,
    maxEntries: WORKSPACE_LIMITS.maxEntries,
  });
  const mask = (text: string) => deps.masker.mask(sandbox.qualified, text);
  return {
    ...report,
    changes: report.changes.map((c) => ({ ...c, path: mask(c.path), link_target: c.link_target === null ? null : mask(c.link_target) })),
    patch: report.patch === null ? null : mask(report.patch),
  };
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

/** One line of a unified diff in the colour git gives it. */
function colourLine(line: string, colour: boolean): string {
  if (line.startsWith('diff --git ') || line.startsWith('--- ') || line.startsWith('+++ ')) return paint(line, 'bold', colour);
  if (/^(new|deleted) file mode |^(old|new) mode /.test(line)) return paint(line, 'bold', colour);
  if (line.startsWith('@@')) return paint(line, 'cyan', colour);
  if (line.startsWith('+')) return paint(line, 'green', colour);
  if (line.startsWith('-')) return paint(line, 'red', colour);
  return line;
}

/** The diff for people: a heading, the patch, then what it leaves out. `raw`: control characters as they are (never for a terminal). */
export function renderDiff(sandbox: SandboxRef, report: WorkspaceReport, colour: boolean, raw = false): string {
  const out: string[] = [];
  const { counts, workspace } = report;
  // Paths in the notes are the sandbox's names: escaped as the content is.
  const note = (text: string, c?: 'yellow' | 'dim') => out.push(paint(`# ${raw ? text : escapeControls(text)}`, c ?? 'dim', colour));
  note(`${sandbox.qualified}: workspace ${workspace.hostPath} (at ${workspace.path} inside)`);
  note(`${counts.added} added, ${counts.modified} modified, ${counts.deleted} deleted, ${counts.mode_changed} mode changes`);
  if (report.patch)
    out.push(
      ...report.patch
        .replace(/\n$/, '')
        .split('\n')
        .map((l) => colourLine(raw ? l : escapeControls(l), colour)),
    );
  const unshown = report.changes.filter((c) => c.diff === 'binary' || c.diff === 'too_large' || c.diff === 'unreadable');
  for (const c of unshown) {
    const why = c.diff === 'binary' ? 'binary' : c.diff === 'too_large' ? 'too large to diff' : 'unreadable';
    note(`${c.change} ${c.path}: ${why}${c.size !== null ? `, ${formatBytes(c.size)}` : ''}`);
  }
  if (report.patch_truncated) note(`the diff stops at ${formatBytes(WORKSPACE_LIMITS.maxPatchBytes)}: later files are not shown`, 'yellow');
  if (report.changes_truncated) note(`only the first ${report.changes.length} changes are listed`, 'yellow');
  const changedOnHost = report.changes.filter((c) => c.host_changed);
  for (const c of changedOnHost) note(`the host changed ${c.path} since the sandbox was created`, 'yellow');
  if (report.patch?.includes('[MASKED]')) note('known secret values are masked above; apply writes the files as they are', 'yellow');
  return out.join('\n') + '\n';
}
