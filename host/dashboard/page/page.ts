// The dashboard page: plain DOM, no framework, bundled by esbuild into /assets/dashboard.js. Every
// API call carries the session cookie (HttpOnly: the browser adds it) and the CSRF token as a
// header (kept in localStorage, which is per origin, port included, unlike cookies). Names and
// output are only ever inserted as text, never as HTML.
import { LIMITS } from '../../../shared/limits.js';
import type { TaskState, TaskSummary, TaskView } from '../../../shared/protocol.js';
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
import type { Overview, OverviewSandbox } from '../overview.js';

const CSRF_KEY = 'sandbox-mcp-csrf';
const CSRF_HEADER = 'x-sandbox-mcp-csrf';
/** The sandboxes table is read again this often while the page is visible. */
const REFRESH_MS = 5000;
/** A waiting read of output; the server bounds it by get_task's own maximum. */
const WAIT_S = 25;
/** After a wait_limit refusal, read without waiting this often. */
const NO_WAIT_RETRY_MS = 2000;
const MIB = 1024 * 1024;

const $ = <T extends HTMLElement = HTMLElement>(id: string): T => document.getElementById(id) as T;

/** An element holding text and elements only. */
function h(tag: string, props: { class?: string; label?: string; title?: string } = {}, ...children: (Node | string)[]): HTMLElement {
  const el = document.createElement(tag);
  if (props.class) el.className = props.class;
  if (props.label !== undefined) el.dataset.label = props.label;
  if (props.title) el.title = props.title;
  el.append(...children);
  return el;
}

// ---- formatting ----------------------------------------------------------------------------
const STATE_MARK: Record<TaskState, string> = { running: '●', succeeded: '✓', failed: '✗', cancelled: '■', timed_out: '⏱', unknown: '?' };

/** A state as a symbol, a word and a colour (never colour alone). */
function stateText(state: TaskState): HTMLElement {
  return h('span', { class: `state ${state}` }, `${STATE_MARK[state]} ${state.replace('_', ' ')}`);
}

function bytes(n: number | null): string {
  if (n === null) return '–';
  if (n < 1024) return `${n} B`;
  if (n < MIB) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 * MIB) return `${(n / MIB).toFixed(1)} MiB`;
  return `${(n / MIB / 1024).toFixed(2)} GiB`;
}

function duration(ms: number | null): string {
  if (ms === null || ms < 0) return '–';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')} min`;
}

const isoMs = (iso: string | null): number | null => (iso === null ? null : Date.parse(iso));
const unixMs = (s: number | null): number | null => (s === null ? null : s * 1000);

// ---- API -----------------------------------------------------------------------------------
/** The session ended (or never began): the page shows the sign-in form. */
class SignedOut extends Error {}
/** An API error: the tools' category, code and suggestion. */
class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | undefined,
    suggestion: string,
  ) {
    super(suggestion);
  }
}

async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const headers: Record<string, string> = { [CSRF_HEADER]: localStorage.getItem(CSRF_KEY) ?? '' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    ...(signal ? { signal } : {}),
  });
  if (res.status === 401) throw new SignedOut();
  const json = (await res.json().catch(() => ({}))) as { error?: { code?: string; suggestion?: string } };
  if (!res.ok) throw new ApiError(res.status, json.error?.code, json.error?.suggestion ?? `the server answered ${res.status}`);
  return json as T;
}

async function signIn(credential: { token: string } | { code: string }): Promise<boolean> {
  const res = await fetch('/api/session', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(credential),
    credentials: 'same-origin',
  });
  if (!res.ok) return false;
  localStorage.setItem(CSRF_KEY, ((await res.json()) as { csrf: string }).csrf);
  return true;
}

const sandboxPath = (id: string): string => `/api/sandboxes/${encodeURIComponent(id)}`;

// ---- state ---------------------------------------------------------------------------------
let listing: OverviewSandbox[] = [];
let selectedSandbox: string | null = null;
let selectedTask: string | null = null;
let following: AbortController | null = null;
let refreshTimer: number | undefined;

function showSignIn(message?: string): void {
  following?.abort();
  window.clearTimeout(refreshTimer);
  localStorage.removeItem(CSRF_KEY);
  $('app').hidden = true;
  $('signout').hidden = true;
  $('who').textContent = '';
  $('signin').hidden = false;
  $('signin-error').hidden = !message;
  $('signin-error').textContent = message ?? '';
  $<HTMLInputElement>('token').focus();
}

async function showApp(): Promise<void> {
  const me = await api<{ principal: { kind: string; name?: string; role?: string } }>('GET', '/api/me');
  $('who').textContent = me.principal.kind === 'operator' ? 'operator' : `${me.principal.name} (${me.principal.role})`;
  $('signin').hidden = true;
  $('app').hidden = false;
  $('signout').hidden = false;
  await refresh();
}

function showActionError(e: unknown): void {
  if (e instanceof SignedOut) return showSignIn('Your session ended: sign in again.');
  $('action-error').textContent = `That did not work: ${e instanceof Error ? e.message : String(e)}`;
  $('action-error').hidden = false;
}

// ---- sandboxes -----------------------------------------------------------------------------
function usageCell(
  label: string,
  amount: { used: number; limit: number | null } | null,
  format: (n: number | null) => string,
): HTMLElement {
  if (amount === null) return h('td', { class: 'num', label, title: 'not measurable here' }, '–');
  const text = h('span', {}, amount.limit === null ? format(amount.used) : `${format(amount.used)} / ${format(amount.limit)}`);
  const td = h('td', { class: 'num', label }, text);
  if (amount.limit) {
    // Inside the text's span: a narrow window lays a cell out as label | value.
    const meter = document.createElement('meter');
    meter.min = 0;
    meter.max = amount.limit;
    meter.low = amount.limit * 0.7;
    meter.high = amount.limit * 0.9;
    meter.optimum = 0;
    meter.value = amount.used;
    meter.title = `${Math.round((amount.used / amount.limit) * 100)} % of the limit`;
    text.append(meter);
  }
  return td;
}

function portsCell(s: OverviewSandbox): HTMLElement {
  const td = h('td', { label: 'Ports' });
  for (const p of s.ports) {
    const a = document.createElement('a');
    a.href = p.url;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.textContent = String(p.port);
    td.append(a, ' ');
  }
  if (s.ports.length === 0) td.append('–');
  return td;
}

/** A cell whose text is cut to the column's width with an ellipsis; the whole text on hover. */
function cutCell(label: string, text: string | null, title = text ?? ''): HTMLElement {
  if (text === null || text === '') return h('td', { label }, '–');
  return h('td', { label }, h('span', { class: 'cut', title }, text));
}

/** A task's command as the listing carries it (masked; its first 2048 characters where it was longer). */
function commandText(t: TaskSummary): string | null {
  if (t.command === undefined) return null;
  return t.command_truncated ? `${t.command}…` : t.command;
}

function renderSandboxes(nowMs: number): void {
  const rows = listing.map((s) => {
    const started = isoMs(s.started_at);
    const end = isoMs(s.end_at);
    const leftMs = end === null ? null : end - nowMs;
    const running = s.tasks?.filter((t) => t.state === 'running').length ?? 0;
    const tr = h(
      'tr',
      {},
      h('td', { class: 'id', label: 'Sandbox' }, s.sandbox_id),
      h('td', { label: 'Owner' }, s.owner === undefined ? '' : (s.owner ?? 'operator')),
      h('td', { label: 'Template' }, s.template ?? '–'),
      // The directory's own name; its whole host path on hover.
      cutCell('Workspace', s.workspace === null ? null : s.workspace.replace(/\/+$/, '').split('/').pop() || '/', s.workspace ?? ''),
      h('td', { class: 'num', label: 'Age' }, duration(started === null ? null : nowMs - started)),
      h('td', { class: `num left${leftMs !== null && leftMs < 60_000 ? ' low' : ''}`, label: 'Time left' }, duration(leftMs)),
      usageCell('Memory', s.usage?.memory_bytes ?? null, bytes),
      usageCell('Processes', s.usage?.processes ?? null, (n) => (n === null ? '–' : String(n))),
      usageCell('Disk', s.usage?.disk_bytes ?? null, bytes),
      portsCell(s),
      h('td', { class: 'num', label: 'Tasks' }, s.tasks === null ? '?' : `${running} running / ${s.tasks.length}`),
    );
    tr.dataset.sandbox = s.sandbox_id;
    tr.setAttribute('aria-selected', String(s.sandbox_id === selectedSandbox));
    tr.addEventListener('click', () => selectSandbox(s.sandbox_id));
    return tr;
  });
  $('sandboxes')
    .querySelector('tbody')!
    .replaceChildren(...rows);
  $('sandbox-count').textContent = `(${listing.length})`;
  $('no-sandboxes').hidden = listing.length > 0;
  // The owner column means something only to those who see everyone's sandboxes.
  $('sandboxes').classList.toggle('no-owner', !listing.some((s) => s.owner !== undefined));
}

// ---- tasks ---------------------------------------------------------------------------------
function cancelButton(sandboxId: string, t: TaskSummary): HTMLElement {
  const button = h('button', { class: 'small danger' }, 'Cancel…') as HTMLButtonElement;
  button.type = 'button';
  button.addEventListener('click', (e) => {
    e.stopPropagation();
    confirmThen(`Cancel task ${t.task_id.slice(0, 8)}…? Its process group gets TERM, then KILL.`, 'Cancel task', () =>
      api('POST', `${sandboxPath(sandboxId)}/tasks/${t.task_id}/cancel`),
    ).catch(showActionError);
  });
  return button;
}

function renderTasks(nowMs: number): void {
  const sb = listing.find((s) => s.sandbox_id === selectedSandbox);
  $('tasks-of').textContent = sb?.sandbox_id ?? '';
  $('sandbox-actions').hidden = !sb;
  const tasks = sb?.tasks ?? [];
  $('no-tasks').hidden = tasks.length > 0;
  $('no-tasks').textContent = !sb
    ? 'Choose a sandbox.'
    : sb.tasks === null
      ? `Tasks cannot be listed: ${sb.tasks_error?.suggestion ?? ''}`
      : 'No tasks.';
  const rows = tasks.map((t) => {
    const started = unixMs(t.started_at);
    const ended = unixMs(t.finished_at) ?? (t.state === 'running' ? nowMs : null);
    const tr = h(
      'tr',
      {},
      h('td', { class: 'id', label: 'Task', title: t.task_id }, `${t.task_id.slice(0, 8)}…`),
      cutCell('Command', commandText(t)),
      h('td', { label: 'State' }, stateText(t.state)),
      h('td', { class: 'num', label: 'Exit' }, t.exit_code === null ? '–' : String(t.exit_code)),
      h('td', { class: 'num', label: 'Started' }, started === null ? '–' : `${duration(nowMs - started)} ago`),
      h('td', { class: 'num', label: 'Duration' }, duration(started !== null && ended !== null ? ended - started : null)),
      h('td', { class: 'num', label: 'stdout' }, bytes(t.stdout_size) + (t.stdout_truncated ? ' (cut)' : '')),
      h('td', { class: 'num', label: 'stderr' }, bytes(t.stderr_size) + (t.stderr_truncated ? ' (cut)' : '')),
      h('td', { label: '' }, ...(t.state === 'running' && sb ? [cancelButton(sb.sandbox_id, t)] : [])),
    );
    tr.dataset.task = t.task_id;
    tr.dataset.state = t.state;
    tr.setAttribute('aria-selected', String(t.task_id === selectedTask));
    tr.addEventListener('click', () => selectTask(t.task_id));
    return tr;
  });
  $('tasks')
    .querySelector('tbody')!
    .replaceChildren(...rows);
}

function selectSandbox(id: string): void {
  if (selectedSandbox !== id) selectTask(null);
  selectedSandbox = id;
  $('action-error').hidden = true;
  const now = Date.now();
  renderSandboxes(now);
  renderTasks(now);
}

// ---- output --------------------------------------------------------------------------------
function renderOutputState(v: TaskView): void {
  $('output-state').replaceChildren(stateText(v.state), v.exit_code === null ? '' : `  exit code ${v.exit_code}`);
  $('output-state').dataset.state = v.state;
  for (const s of STREAMS) {
    const note = cutNote(v, s, $(s).querySelector('.gap') !== null);
    $(`${s}-size`).textContent = `${bytes(v[`${s}_size`])} of ${CAP_TEXT}${note}`;
  }
}

function append(stream: Stream, ...parts: (Node | string)[]): void {
  const pre = $(stream);
  const isAtEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
  pre.append(...parts);
  if (isAtEnd) pre.scrollTop = pre.scrollHeight;
}

/** A capped stream's end after its log, across the marked gap. */
function appendTail(stream: Stream, tail: string): void {
  append(stream, h('span', { class: 'gap', title: TAIL_GAP_TITLE }, TAIL_GAP_TEXT), tail);
}

/** One page of the task's output: get_task's own result, masked as it masks it. */
async function readOutput(sandboxId: string, taskId: string, ask: PageAsk, signal: AbortSignal): Promise<TaskView> {
  for (let wait = ask.wait; ; wait = 0) {
    const query = `stdout_offset=${ask.stdout_offset}&stderr_offset=${ask.stderr_offset}&limit=${LIMITS.pageMaxBytes}&wait=${wait}`;
    try {
      return await api<TaskView>('GET', `${sandboxPath(sandboxId)}/tasks/${taskId}/output?${query}`, undefined, signal);
    } catch (e) {
      // Other readers hold this sandbox's waiting slots: read without waiting, now and then.
      if (!(e instanceof ApiError && e.code === 'wait_limit')) throw e;
      await new Promise((resolve) => setTimeout(resolve, NO_WAIT_RETRY_MS));
    }
  }
}

function selectTask(taskId: string | null): void {
  following?.abort();
  following = null;
  selectedTask = taskId;
  for (const s of STREAMS) {
    $(s).replaceChildren();
    $(`${s}-size`).textContent = '';
  }
  $('output-state').textContent = taskId ? 'loading…' : 'Choose a task.';
  delete $('output-state').dataset.state;
  $('output-of').textContent = taskId ?? '';
  const task = listing.find((s) => s.sandbox_id === selectedSandbox)?.tasks?.find((t) => t.task_id === taskId);
  const command = task ? commandText(task) : null;
  $('output-command').textContent = command ?? '';
  $('output-command').hidden = command === null;
  renderTasks(Date.now());
  const sandboxId = selectedSandbox;
  if (!taskId || !sandboxId) return;
  const ctl = new AbortController();
  following = ctl;
  followTask({
    read: (ask) => readOutput(sandboxId, taskId, ask, ctl.signal),
    append,
    appendTail,
    onView: renderOutputState,
    waitS: WAIT_S,
    isStopped: () => ctl.signal.aborted,
  }).catch((e: unknown) => {
    if (ctl.signal.aborted) return;
    if (e instanceof SignedOut) return showSignIn('Your session ended: sign in again.');
    $('output-state').textContent = `Lost the output: ${e instanceof Error ? e.message : String(e)}`;
  });
}

// ---- actions -------------------------------------------------------------------------------
/** Asks in a modal <dialog>: what happens, and the choice to keep things as they are. */
function ask(text: string, yes: string, withSeconds = false): Promise<{ isYes: boolean; seconds: number }> {
  const dialog = $<HTMLDialogElement>('confirm');
  $('confirm-text').textContent = text;
  $('confirm-yes').textContent = yes;
  $('extend-field').hidden = !withSeconds;
  dialog.returnValue = '';
  dialog.showModal();
  return new Promise((resolve) => {
    dialog.addEventListener(
      'close',
      () => resolve({ isYes: dialog.returnValue === 'yes', seconds: Number($<HTMLInputElement>('extend-seconds').value) }),
      { once: true },
    );
  });
}

async function confirmThen(text: string, yes: string, run: () => Promise<unknown>): Promise<void> {
  if (!(await ask(text, yes)).isYes) return;
  $('action-error').hidden = true;
  try {
    await run();
  } catch (e) {
    showActionError(e);
  }
  await refresh();
}

// ---- refresh -------------------------------------------------------------------------------
async function refresh(): Promise<void> {
  window.clearTimeout(refreshTimer);
  try {
    const overview = await api<Overview>('GET', '/api/sandboxes');
    listing = overview.sandboxes;
    if (selectedSandbox && !listing.some((s) => s.sandbox_id === selectedSandbox)) {
      selectedSandbox = null;
      selectTask(null);
    }
    const now = Date.now();
    renderSandboxes(now);
    renderTasks(now);
    const errors = overview.errors.map((e) => `${e.provider}: ${e.category}: ${e.suggestion}`).join(' · ');
    $('provider-errors').textContent = errors;
    $('provider-errors').hidden = errors === '';
    $('updated').textContent = `updated ${new Date(now).toLocaleTimeString()}`;
  } catch (e) {
    if (e instanceof SignedOut) return showSignIn('Your session ended: sign in again.');
    $('updated').textContent = `could not refresh: ${e instanceof Error ? e.message : String(e)}`;
  }
  // Only while someone looks: a hidden tab costs the sandboxes nothing.
  if (document.visibilityState === 'visible') refreshTimer = window.setTimeout(() => refresh().catch(showActionError), REFRESH_MS);
}

document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible' && !$('app').hidden) refresh().catch(showActionError);
});

// ---- start ---------------------------------------------------------------------------------
$('signin').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = $<HTMLInputElement>('token');
  const isSignedIn = await signIn({ token: input.value });
  input.value = '';
  if (!isSignedIn) return showSignIn('That token was not accepted.');
  await showApp().catch(() => showSignIn('The server did not answer.'));
});
$('signout').addEventListener('click', async () => {
  await api('DELETE', '/api/session').catch(() => undefined);
  showSignIn();
});
$('kill').addEventListener('click', () => {
  const id = selectedSandbox;
  if (!id) return;
  confirmThen(`Kill sandbox ${id}? Everything in it ends, its tasks too.`, 'Kill sandbox', () =>
    api('POST', `${sandboxPath(id)}/kill`),
  ).catch(showActionError);
});
$('extend').addEventListener('click', async () => {
  const id = selectedSandbox;
  if (!id) return;
  const answer = await ask(`Set the lifetime of ${id}, counted from now:`, 'Set lifetime', true);
  if (!answer.isYes) return;
  $('action-error').hidden = true;
  await api('POST', `${sandboxPath(id)}/timeout`, { timeout: answer.seconds }).catch(showActionError);
  await refresh();
});

async function start(): Promise<void> {
  // A one-time link (sandbox-mcp dashboard): the code is in the fragment, which the browser never
  // sends; it leaves the address bar and the history before anything else happens.
  const code = new URLSearchParams(location.hash.slice(1)).get('code');
  if (code !== null) {
    history.replaceState(null, '', location.pathname);
    if (!(await signIn({ code }))) return showSignIn('That sign-in link was used already or has expired: ask for a new one.');
  }
  if (!localStorage.getItem(CSRF_KEY)) return showSignIn();
  try {
    await showApp();
  } catch (e) {
    showSignIn(e instanceof SignedOut ? undefined : 'The server did not answer.');
  }
}
start().catch(() => showSignIn('The server did not answer.'));
