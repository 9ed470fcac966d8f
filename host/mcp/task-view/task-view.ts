// The MCP App view of a task (plain DOM and ext-apps' App, no framework), for the results of
// start_task, get_task, run_command and run_code. start_task and a backgrounded run_* call are
// followed at once; a get_task result is shown as it is, with a Follow button (an agent polling
// get_task gets one view per call); a run_* call that finished shows its result and follows
// nothing. Following reads get_task through the host from byte 0, only while the view is on
// screen, and stops at teardown. Output goes in as text nodes only, never as HTML.
import { App, applyDocumentTheme, applyHostStyleVariables } from '@modelcontextprotocol/ext-apps';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { LIMITS } from '../../../shared/limits.js';
import type { TaskView } from '../../../shared/protocol.js';
import {
  CAP_TEXT,
  cutNote,
  followTask,
  STREAMS,
  TAIL_GAP_TEXT,
  TAIL_GAP_TITLE,
  type PageAsk,
  type Stream,
} from '../../util/follow-task.js';

/** A waiting get_task stays well under hosts' usual 60 s request timeout. */
const WAIT_S = 25;
/** After a wait_limit refusal (the agent's own get_task calls hold the sandbox's waiting slots), read without waiting this often. */
const NO_WAIT_RETRY_MS = 2000;

type Handle = { sandbox_id: string; task_id: string };

const STATE_TEXT: Record<TaskView['state'], string> = {
  running: '● running',
  succeeded: '✓ succeeded',
  failed: '✗ failed',
  cancelled: '■ cancelled',
  timed_out: '⏱ timed out',
  unknown: '? unknown',
};

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;

function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}

function showState(state: TaskView['state'] | 'finished', text: string): void {
  const el = $('state');
  el.textContent = text;
  el.dataset.state = state;
  document.body.dataset.state = state; // for tests and host styling
}

function renderView(v: TaskView): void {
  showState(v.state, STATE_TEXT[v.state]);
  $('exit').textContent = v.exit_code === null ? '–' : String(v.exit_code);
  const end = v.finished_at ?? Math.floor(Date.now() / 1000);
  $('duration').textContent = v.started_at === null ? '–' : `${Math.max(0, end - v.started_at)} s`;
  for (const s of STREAMS) {
    const note = cutNote(v, s, $(s).querySelector('.gap') !== null);
    $(`${s}-size`).textContent = `${formatBytes(v[`${s}_size`])} of ${CAP_TEXT}${note}`;
  }
  $('cancel').hidden = v.state !== 'running' || !$('confirm').hidden;
}

function append(stream: Stream, ...parts: (Node | string)[]): void {
  const pre = $(stream);
  const isAtEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.append(...parts);
  if (isAtEnd) pre.scrollTop = pre.scrollHeight;
}

/** A capped stream's end after its log, across the marked gap (text only). */
function appendTail(stream: Stream, tail: string): void {
  const gap = document.createElement('span');
  gap.className = 'gap';
  gap.title = TAIL_GAP_TITLE;
  gap.textContent = TAIL_GAP_TEXT;
  append(stream, gap, tail);
}

function showError(message: string): void {
  const el = $('error');
  el.textContent = message;
  el.hidden = false;
}

/** The error object of a failed tool result ({category, code?, suggestion}), if it has one. */
function toolError(result: CallToolResult): { category?: string; code?: string; suggestion?: string } {
  const text = (result.content?.[0] as { text?: unknown } | undefined)?.text;
  try {
    return (JSON.parse(typeof text === 'string' ? text : '{}') as { error?: object }).error ?? {};
  } catch {
    return {};
  }
}

// ---- on screen -----------------------------------------------------------------------------
// Following costs the sandbox a waiting process: only while someone can see the view.
let isOnScreen = true;
let onScreenAgain: (() => void) | undefined;
new IntersectionObserver((entries) => {
  isOnScreen = entries.some((e) => e.isIntersecting);
  if (isOnScreen) onScreenAgain?.();
}).observe(document.body);
const whenOnScreen = (): Promise<void> => (isOnScreen ? Promise.resolve() : new Promise((resolve) => (onScreenAgain = resolve)));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---- following -----------------------------------------------------------------------------
let handle: Handle | undefined;
let isTornDown = false;
let following: Promise<unknown> | undefined;

async function readPage(ask: PageAsk): Promise<TaskView> {
  await whenOnScreen();
  for (let wait = ask.wait; ; wait = 0) {
    const result = await app.callServerTool({ name: 'get_task', arguments: { ...handle, ...ask, wait, limit: LIMITS.pageMaxBytes } });
    if (!result.isError) return result.structuredContent as unknown as TaskView;
    const error = toolError(result);
    if (error.code !== 'wait_limit') throw new Error(error.suggestion ?? 'get_task failed');
    await sleep(NO_WAIT_RETRY_MS);
  }
}

function follow(): void {
  if (!handle || following || isTornDown) return;
  for (const s of STREAMS) $(s).replaceChildren();
  $('follow').hidden = true;
  document.body.dataset.following = 'true';
  following = followTask({
    read: readPage,
    append,
    appendTail,
    onView: renderView,
    waitS: WAIT_S,
    isStopped: () => isTornDown,
  })
    .catch((e: unknown) => showError(`Stopped following: ${e instanceof Error ? e.message : String(e)}`))
    .finally(() => {
      following = undefined;
      document.body.dataset.following = 'false';
    });
}

/** A run_command/run_code call that finished within its time: its result, nothing to follow. */
function showFinishedRun(r: { exit_code: number | null; stdout: string; stderr: string; timed_out: boolean }): void {
  const state = r.timed_out ? 'timed out' : r.exit_code === 0 ? 'finished' : 'failed';
  showState('finished', `${r.exit_code === 0 && !r.timed_out ? '✓' : '✗'} ${state}, exit code ${r.exit_code ?? 'unknown'}`);
  $('task-meta').hidden = true;
  append('stdout', r.stdout);
  append('stderr', r.stderr);
}

// ---- the host ------------------------------------------------------------------------------
const app = new App({ name: 'sandbox-mcp task view', version: '1' }, {}, { autoResize: true });

/** Set for a get_task result: by the host's tool info, else by its input (only get_task's names a task_id). */
let isGetTask = false;
// Handlers before connect(): the host may send the input and result right after the handshake.
app.ontoolinput = ({ arguments: args }) => {
  const input = (args ?? {}) as { command?: unknown; code?: unknown; task_id?: unknown };
  const command = input.command ?? input.code;
  if (typeof command === 'string') $('command').textContent = command;
  if (typeof input.task_id === 'string') isGetTask = true;
};
app.ontoolresult = (result) => {
  const sc = result.structuredContent as (Partial<TaskView> & { sandbox_id?: string; backgrounded?: boolean }) | undefined;
  if (result.isError || !sc) {
    showError(`The call failed: ${toolError(result).suggestion ?? 'see its result in the conversation'}`);
    return;
  }
  if (typeof sc.task_id !== 'string' || typeof sc.sandbox_id !== 'string') {
    showFinishedRun(sc as { exit_code: number | null; stdout: string; stderr: string; timed_out: boolean });
    return;
  }
  handle = { sandbox_id: sc.sandbox_id, task_id: sc.task_id };
  $('task').textContent = `${sc.sandbox_id} · task ${sc.task_id}`;
  const view = sc as TaskView;
  if (isGetTask) {
    // One view per get_task call: show this page as it is (with a capped stream's end, where it
    // reached the end of the log); following is the reader's choice.
    for (const s of STREAMS) {
      append(s, view[s]);
      const tail = view[`${s}_tail`];
      if (tail !== undefined) appendTail(s, tail);
    }
    renderView(view);
    $('follow').hidden = false;
    return;
  }
  renderView(view);
  follow();
};
app.ontoolcancelled = () => showError('The call was cancelled.');
app.onteardown = async () => {
  isTornDown = true;
  return {};
};
app.onhostcontextchanged = (context) => {
  if (context.theme) applyDocumentTheme(context.theme);
  if (context.styles?.variables) applyHostStyleVariables(context.styles.variables);
};

$('follow').addEventListener('click', follow);
$('cancel').addEventListener('click', () => {
  $('confirm').hidden = false;
  $('cancel').hidden = true;
});
$('confirm-no').addEventListener('click', () => {
  $('confirm').hidden = true;
  $('cancel').hidden = false;
});
$('confirm-yes').addEventListener('click', async () => {
  $('confirm').hidden = true;
  if (!handle) return;
  const result = await app.callServerTool({
    name: 'cancel_task',
    arguments: { ...handle, stdout_offset: LIMITS.streamCapBytes, stderr_offset: LIMITS.streamCapBytes },
  });
  if (result.isError) showError(`cancel_task failed: ${toolError(result).suggestion ?? ''}`);
  else renderView(result.structuredContent as unknown as TaskView);
});

await app.connect();
const context = app.getHostContext();
if (context?.toolInfo?.tool.name === 'get_task') isGetTask = true;
if (context) app.onhostcontextchanged(context);
document.body.dataset.connected = 'true';
